# The installed package: `cmake --install build --prefix P` puts the libraries, their public
# headers and a CMake package under P, and another project then does
#   find_package(gradscope 0.1 CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE gradscope::distributed)
# Each library registers itself with gs_install_library(); gs_install_package() writes the
# package files once every library is known.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gradscope)

# gs_install_library(<target> <name> [HEADERS <dir>...]): installs <target> as gradscope::<name>
# and copies each include directory given (its gs/ tree) under the install prefix.
function(gs_install_library target name)
  cmake_parse_arguments(ARG "" "" "HEADERS" ${ARGN})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS ${target} EXPORT gradscopeTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  foreach(dir IN LISTS ARG_HEADERS)
    install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            FILES_MATCHING PATTERN "*.hpp")
  endforeach()
endfunction()

# The export set, the config file (which finds the dependencies the installed libraries were
# built with) and its version file.
function(gs_install_package)
  install(EXPORT gradscopeTargets NAMESPACE gradscope:: DESTINATION ${GS_INSTALL_CMAKEDIR})
  get_property(GS_PACKAGE_FFTW3 GLOBAL PROPERTY GS_PACKAGE_FFTW3)
  if(NOT GS_PACKAGE_FFTW3)
    set(GS_PACKAGE_FFTW3 OFF)
  endif()
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gradscopeConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/gradscopeConfig.cmake
                                INSTALL_DESTINATION ${GS_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/gradscopeConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/gradscopeConfig.cmake
                ${PROJECT_BINARY_DIR}/gradscopeConfigVersion.cmake
          DESTINATION ${GS_INSTALL_CMAKEDIR})
endfunction()
