# Installs the client library, its public headers, the generated message
# headers and a CMake package so that an outside project can do
#   find_package(placement CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE placement::client)
include(CMakePackageConfigHelpers)
install(TARGETS placement_client placement_proto placement_common
  EXPORT placementTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT placementTargets NAMESPACE placement::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/placementConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/placementConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/placementConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/placementConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/placementConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placement)
