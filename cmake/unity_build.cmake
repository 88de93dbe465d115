# Unity builds for CI: CI compiles everything twice from nothing (ASan, then
# Release) on 2 cores, and most of a library file's compile is parsing and
# instantiating the same absl/gRPC/protobuf headers its neighbours parse.
# PLACEMENT_UNITY=ON compiles each library's sources PLACEMENT_UNITY_BATCH
# at a time in one translation unit (CMake's UNITY_BUILD). The scripts that
# build from nothing (scripts/test.sh, run.sh, sanitize.sh, gpu_check.sh, the
# Dockerfile) turn it on; the option's default is off, since an edit then
# recompiles its whole batch, which an edit-compile loop should not pay. Two
# files of one library may not define the same internal name (the unity build
# fails to compile), and a file must include what it uses: a batch hides a
# missing include that the default build shows.
include(${CMAKE_CURRENT_LIST_DIR}/source_files.cmake)

option(PLACEMENT_UNITY "Compile the libraries in batches of sources (CI builds from scratch)" OFF)
set(PLACEMENT_UNITY_BATCH 16 CACHE STRING "Sources per batch when PLACEMENT_UNITY is ON")

# placement_unity(TARGET...): batches each TARGET's sources when
# PLACEMENT_UNITY is ON, except the files that define command-line flags
# (ABSL_FLAG): a static library's flags file is linked only into the binaries
# that use it (placementd, placectl), and a batch would carry the daemon's
# flags into every test and benchmark, where they clash with the benchmarks'
# own (--backend, --heartbeat_interval).
function(placement_unity)
  if(NOT PLACEMENT_UNITY)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    set_target_properties(${target} PROPERTIES
      UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${PLACEMENT_UNITY_BATCH})
    placement_readable_sources(${target} sources)
    foreach(source IN LISTS sources)
      file(STRINGS "${source}" flags REGEX "^ABSL_FLAG\\(" LIMIT_COUNT 1)
      if(flags)
        set_source_files_properties("${source}" TARGET_DIRECTORY ${target}
          PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endforeach()
  endforeach()
endfunction()
