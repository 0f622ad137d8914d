# Included by llama.cpp's project() when building llama-cpp-python (see the Makefile):
# llama-cpp-python forces llama.cpp's `common` library on, but its Python code never loads
# libllama-common, and compiling it is about a third of the build. Turn it off again here,
# after llama-cpp-python's FORCE and before llama.cpp reads the option.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "crag: llama-cpp-python never loads libllama-common" FORCE)
