# Included after every project() call of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE, set by
# scripts/install.sh) to build only what the Python binding loads: libllama and ggml. llama.cpp's
# common library (command-line helpers, an HTTP client) is used by its tools, not by the binding,
# so it is not built; neither is the multimodal library (LLAVA_BUILD=OFF in install.sh). Optimisation
# levels are llama.cpp's own: a build at -O1 for libllama compiles faster, but its effect on a
# small model's decode speed (where graph building weighs more) was not measured, so it is not used.
if(PROJECT_NAME STREQUAL "llama.cpp")
  # A normal variable wins over the cache entry llama-cpp-python forces ON (policy CMP0077).
  set(LLAMA_BUILD_COMMON OFF)
endif()
