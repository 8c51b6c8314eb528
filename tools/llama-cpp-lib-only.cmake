# Included by llama.cpp's own project() call while `make setup-local-model` builds the
# llama-cpp-python wheel (CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python forces
# llama.cpp's "common" library on, but its Python code loads only libllama and libggml:
# common (arg parsing, chat templates, an HTTP client; about a third of the build's C++)
# is built, installed and never loaded. Turning it off here, after that force and before
# llama.cpp reads the option, leaves the libraries nib loads exactly as they were.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: build the common library (unused by llama-cpp-python)" FORCE)
