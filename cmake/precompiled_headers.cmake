# Precompiled headers: most of a build's time on 2 cores is parsing gRPC's
# and the generated API's headers (CI builds everything twice: ASan, then
# Release). The files that use them compile about twice as fast with those
# headers precompiled (client/src/session.cc: 4.2 s against 8.6 s); the
# others would only pay for loading the header (~0.5 s each), so they go
# without. PLACEMENT_PCH=OFF turns every precompiled header off, e.g. to
# check that each file includes what it uses.
include(${CMAKE_CURRENT_LIST_DIR}/source_files.cmake)

option(PLACEMENT_PCH "Precompile the gRPC and generated API headers" ON)

file(GLOB placement_pch_protos RELATIVE ${PROJECT_SOURCE_DIR}/proto
  ${PROJECT_SOURCE_DIR}/proto/placement/v1/*.proto)
set(PLACEMENT_PCH_HEADERS <algorithm> <atomic> <cstdint> <cstring> <functional> <memory>
  <string> <thread> <vector>
  <absl/container/flat_hash_map.h> <absl/status/status.h> <absl/status/statusor.h>
  <absl/strings/str_cat.h> <absl/synchronization/mutex.h> <absl/time/time.h>
  <grpcpp/grpcpp.h>)
foreach(proto ${placement_pch_protos})
  string(REGEX REPLACE "\\.proto$" ".grpc.pb.h" header ${proto})
  list(APPEND PLACEMENT_PCH_HEADERS "<${header}>")
endforeach()

# placement_precompile_grpc(TARGET): precompiles PLACEMENT_PCH_HEADERS for
# those of TARGET's sources that use gRPC or the generated API -- the file
# or its own header (same name, .h) includes a grpcpp/ or a .pb.h header --
# and leaves the others as they are. The test is redone at each configure
# (a stale answer only costs build time). Call it after the target's
# sources are added: later ones all get the header.
function(placement_precompile_grpc target)
  if(NOT PLACEMENT_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${PLACEMENT_PCH_HEADERS})
  # A batch of a unity build (unity_build.cmake) holds files of both kinds:
  # loading the header once per batch costs little.
  if(PLACEMENT_UNITY)
    return()
  endif()
  # Generated sources cannot be read at configure time; they keep the header.
  placement_readable_sources(${target} sources)
  foreach(source IN LISTS sources)
    file(READ "${source}" text)
    string(REGEX REPLACE "\\.cc$" ".h" header "${source}")
    if(EXISTS "${header}")
      file(READ "${header}" header_text)
      string(APPEND text "${header_text}")
    endif()
    if(NOT text MATCHES "#include [<\"](grpcpp/|[^>\"\n]*\\.pb\\.h)")
      set_source_files_properties("${source}" TARGET_DIRECTORY ${target}
        PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
