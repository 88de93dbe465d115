# placement_readable_sources(TARGET OUT): the absolute paths of TARGET's .cc
# sources that exist at configure time (generated ones do not yet, and
# generator expressions name none), for the configure-time scans of
# precompiled_headers.cmake and unity_build.cmake.
function(placement_readable_sources target out)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(readable)
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.cc$" OR source MATCHES "^\\$<")
      continue()
    endif()
    if(NOT IS_ABSOLUTE "${source}")
      set(source "${source_dir}/${source}")
    endif()
    if(EXISTS "${source}")
      list(APPEND readable "${source}")
    endif()
  endforeach()
  set(${out} ${readable} PARENT_SCOPE)
endfunction()
