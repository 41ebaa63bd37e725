# The kernels the GPU benchmark and the GPU tests share (gpu_util.h).
if(NOT TARGET crpm_gpu_util)
  add_library(crpm_gpu_util STATIC ${CMAKE_CURRENT_LIST_DIR}/gpu_util.cu)
  target_include_directories(crpm_gpu_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(crpm_gpu_util PUBLIC CUDA::cudart_static)
endif()
