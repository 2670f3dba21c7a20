# SPDX-License-Identifier: MIT
# Install rules: the public headers (the user API under include/switchyard/,
# the backend API for plugin authors under include/switchyard/backend/), the
# library (static, or shared with BUILD_SHARED_LIBS=ON), the CMake package
# Switchyard::switchyard with its version file, a switchyard.pc for
# pkg-config, and the switchyard command. The SPIR-V is compiled into the
# library: nothing else to ship, and a consumer needs neither glslc nor nvcc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(SY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Switchyard)

# distributed.h stays out: its library (switchyard_distributed, over MPI) is
# not part of the installed package yet; builds of this tree and subproject
# users link Switchyard::distributed.
install(DIRECTORY runtime/include/switchyard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT Development PATTERN backend EXCLUDE PATTERN distributed.h EXCLUDE)
install(DIRECTORY runtime/include/switchyard/backend
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard COMPONENT Backend)
install(FILES ${PROJECT_BINARY_DIR}/runtime/include/switchyard/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard COMPONENT Development)
install(TARGETS switchyard EXPORT SwitchyardTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
                NAMELINK_COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT Runtime)
if(TARGET switchyard_cli)
  install(TARGETS switchyard_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
endif()
install(EXPORT SwitchyardTargets NAMESPACE Switchyard:: DESTINATION ${SY_CMAKE_DIR}
        COMPONENT Development)

# What a consumer must find for the library's private dependencies: a
# static library carries them (ZLIB, the CUDA runtime); a shared one does not.
get_target_property(sy_type switchyard TYPE)
set(SY_STATIC OFF)
if(sy_type STREQUAL "STATIC_LIBRARY")
  set(SY_STATIC ON)
endif()
set(SY_WITH_BLAS ${SWITCHYARD_HAVE_CBLAS})
set(SY_SHADERC_NAMES "${SWITCHYARD_SHADERC_NAMES}")  # custom GLSL kernels' static libraries
set(SY_WITH_CUDA OFF)
if(TARGET switchyard_cuda)
  set(SY_WITH_CUDA ON)
endif()
configure_package_config_file(cmake/SwitchyardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake INSTALL_DESTINATION ${SY_CMAKE_DIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake
              ${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
        DESTINATION ${SY_CMAKE_DIR} COMPONENT Development)

# pkg-config: the private libraries go in Libs of a static install (there is
# nothing else to find them by) and in Libs.private of a shared one.
set(sy_pc_deps "-lz")
if(SWITCHYARD_HAVE_CBLAS)
  get_filename_component(blas_name ${SWITCHYARD_CBLAS_LIBRARY} NAME_WE)
  string(REGEX REPLACE "^lib" "" blas_name ${blas_name})
  string(APPEND sy_pc_deps " -l${blas_name}")  # found on the linker's own path
endif()
foreach(l ${SWITCHYARD_SHADERC_NAMES})  # the static archives (in an order one pass resolves)
  string(APPEND sy_pc_deps " -l:lib${l}.a")
endforeach()
if(SY_WITH_CUDA)
  # The toolkit's own directory: a static install with CUDA needs the
  # toolkit where it was at build time (the shared library does not).
  string(APPEND sy_pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt")
endif()
string(APPEND sy_pc_deps " ${CMAKE_DL_LIBS} -pthread")
# The C++ runtime, for a C program linking the static library (the C API).
foreach(l stdc++ c++ m)
  if(l IN_LIST CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
    string(APPEND sy_pc_deps " -l${l}")
  endif()
endforeach()
string(REGEX REPLACE " dl " " -ldl " sy_pc_deps "${sy_pc_deps} ")
string(STRIP "${sy_pc_deps}" sy_pc_deps)
if(SY_STATIC)
  set(SY_PC_LIBS "-L\${libdir} -lswitchyard ${sy_pc_deps}")
  set(SY_PC_LIBS_PRIVATE "")
else()
  set(SY_PC_LIBS "-L\${libdir} -lswitchyard")
  set(SY_PC_LIBS_PRIVATE "${sy_pc_deps}")
endif()
file(RELATIVE_PATH SY_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)  # "../.." for lib/
string(REGEX REPLACE "/$" "" SY_PC_UP "${SY_PC_UP}")
configure_file(cmake/switchyard.pc.in ${PROJECT_BINARY_DIR}/switchyard.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/switchyard.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT Development)
