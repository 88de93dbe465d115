# `cmake --install build` ships the client alone: the library (one archive
# that also holds the generated messages and the common/ code it uses), its
# headers and a CMake package, so that an outside project can do
#   find_package(placement CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE placement::client)
# Nothing else is installed by default: no generated headers, no test or
# benchmark binaries. The daemon and placectl are the `daemon` component,
# installed only when asked for (`cmake --install build --component daemon`,
# as the Dockerfile does). tests/install checks the installed file set.
include(CMakePackageConfigHelpers)
install(TARGETS placement_client_package
  EXPORT placementTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT placementTargets NAMESPACE placement::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement COMPONENT client)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/placementConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/placementConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/placementConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/placementConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/placementConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement COMPONENT client)
