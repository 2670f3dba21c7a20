# SPDX-License-Identifier: MIT
# A cross-build (cmake/mingw-w64.cmake) takes the header-only dependencies
# from the build machine: nlohmann-json, CLI11 and the Vulkan headers. Their
# folders are linked into one include directory of the build tree, never
# /usr/include itself (its C library headers are the build machine's).
set(sy_host_include ${PROJECT_BINARY_DIR}/host-include)
file(MAKE_DIRECTORY ${sy_host_include})
foreach(d nlohmann CLI vulkan vk_video)
  if(EXISTS /usr/include/${d} AND NOT EXISTS ${sy_host_include}/${d})
    file(CREATE_LINK /usr/include/${d} ${sy_host_include}/${d} SYMBOLIC)
  endif()
endforeach()
foreach(t nlohmann_json::nlohmann_json CLI11::CLI11)
  add_library(${t} INTERFACE IMPORTED)
  set_target_properties(${t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${sy_host_include})
endforeach()
if(EXISTS ${sy_host_include}/vulkan/vulkan.h)
  set(SWITCHYARD_VULKAN_INCLUDE ${sy_host_include} CACHE PATH "Vulkan headers")
endif()
