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

# The `daemon` component: placementd and placectl (their own CMakeLists), and what makes
# them an installable service (docs/deploy.md, "systemd"):
#   lib/systemd/system/placementd.service   the unit, ExecStart= pointing at this prefix's
#                                           bin/placementd and its flagfile
#   <sysconfdir>/placementd/placementd.flags  the example flagfile (deploy/placementd.flags)
#   lib/sysusers.d/placementd.conf          the placementd user and group
#   lib/tmpfiles.d/placementd.conf          /etc/placementd and its tls/ and auth/ directories
# The unit's paths are rewritten at install time, so `--prefix` given to `cmake --install`
# counts; tests/install/install_test.sh checks the result with systemd-analyze verify.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/placementd.flags
  DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/placementd COMPONENT daemon EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/placementd.sysusers
  DESTINATION lib/sysusers.d RENAME placementd.conf
  COMPONENT daemon EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/placementd.tmpfiles
  DESTINATION lib/tmpfiles.d RENAME placementd.conf
  COMPONENT daemon EXCLUDE_FROM_ALL)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_SYSCONFDIR}\")
    set(sysconf \"${CMAKE_INSTALL_SYSCONFDIR}\")
  elseif(prefix STREQUAL \"/usr\")
    set(sysconf \"/etc\")
  else()
    set(sysconf \"\${prefix}/${CMAKE_INSTALL_SYSCONFDIR}\")
  endif()
  file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/placementd.service\" unit)
  string(REPLACE \"/usr/local/bin/placementd\" \"\${prefix}/${CMAKE_INSTALL_BINDIR}/placementd\"
    unit \"\${unit}\")
  string(REPLACE \"/etc/placementd/placementd.flags\" \"\${sysconf}/placementd/placementd.flags\"
    unit \"\${unit}\")
  set(dir \"\$ENV{DESTDIR}\${prefix}/lib/systemd/system\")
  file(MAKE_DIRECTORY \"\${dir}\")
  file(WRITE \"\${dir}/placementd.service\" \"\${unit}\")
  message(STATUS \"Installing: \${dir}/placementd.service\")
" COMPONENT daemon EXCLUDE_FROM_ALL)
