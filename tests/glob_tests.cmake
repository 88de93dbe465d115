# CMakeLists.txt add their own.
file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
foreach(src ${srcs})
  get_filename_component(name ${src} NAME_WE)
  placement_add_test(${name} SOURCES ${src}
    LIBS placement_server placement_client placement_testing
    LABELS ${PLACEMENT_TEST_LABEL})
endforeach()
file(GLOB subdirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/*)
foreach(dir ${subdirs})
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/CMakeLists.txt)
    add_subdirectory(${dir})
  endif()
endforeach()
