# Included after every project() call of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE, set by
# scripts/install.sh) to build only what the Python binding loads: libllama and ggml. llama.cpp's
# common library (command-line helpers, an HTTP client) is used by its tools, not by the binding,
# so it is not built; neither is the multimodal library (LLAVA_BUILD=OFF in install.sh). libllama
# itself (model loading, graph building, sampling) compiles at -O1 instead of -O3, a third less
# compile time: the kernels a decode spends its time in are ggml's, which keep -O3.
if(PROJECT_NAME STREQUAL "llama.cpp")
  # A normal variable wins over the cache entry llama-cpp-python forces ON (policy CMP0077).
  set(LLAMA_BUILD_COMMON OFF)
  # Deferred to the end of llama.cpp's directory, where the target exists; a later -O wins.
  cmake_language(DEFER CALL target_compile_options llama PRIVATE -O1)
endif()
