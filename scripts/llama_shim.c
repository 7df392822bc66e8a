/* libllama.so for llama-cpp-python over a prebuilt llama.cpp (scripts/llama_prebuilt.sh).
 *
 * llama-cpp-python's ctypes bindings look up every function they declare when they are imported.
 * The prebuilt library (llama.cpp release v0.5.0) exports all of them but the few that llama.cpp
 * added after that release: an extended batch API, llama_process and llama_get_causal_attn, which
 * the Llama class does not call. llama.h differs between the two versions by those additions only,
 * so the structures and every other function have the same layout and signature. This library
 * links the prebuilt one (its symbols are found through it), defines the missing functions as
 * stops that say so, and loads ggml's CPU backend from its own directory when it is loaded: the
 * prebuilt ggml loads its CPU code at run time, from the directory of the running program unless
 * told another one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ggml_backend_load_all_from_path(const char *dir_path);
void ggml_log_set(void (*callback)(int level, const char *text, void *user_data), void *user_data);

/* ggml announces the backend it loads on stderr: only its warnings and errors are passed on
 * (enum ggml_log_level: 3 warn, 4 error). */
static void warnings_only(int level, const char *text, void *user_data) {
    (void)user_data;
    if (level == 3 || level == 4) {
        fputs(text, stderr);
    }
}

#define MISSING(name)                                                                       \
    void name(void) {                                                                       \
        fputs("llama.cpp: " #name " is not in the prebuilt library (release v0.5.0)\n", stderr); \
        abort();                                                                            \
    }

MISSING(llama_batch_ext_add)
MISSING(llama_batch_ext_add_embd)
MISSING(llama_batch_ext_add_seq)
MISSING(llama_batch_ext_add_token)
MISSING(llama_batch_ext_clear)
MISSING(llama_batch_ext_free)
MISSING(llama_batch_ext_init)
MISSING(llama_batch_ext_set_embd_state)
MISSING(llama_batch_ext_set_embd_token)
MISSING(llama_batch_ext_set_output_embd)
MISSING(llama_batch_ext_set_output_logits)
MISSING(llama_batch_ext_set_pos)
MISSING(llama_get_causal_attn)
MISSING(llama_process)

/* The best of the CPU variants installed beside this library, by ggml's own choice. */
__attribute__((constructor)) static void load_cpu_backend(void) {
    Dl_info info;
    if (!dladdr((void *)load_cpu_backend, &info) || info.dli_fname == NULL) {
        return;
    }
    char path[4096];
    strncpy(path, info.dli_fname, sizeof path - 1);
    path[sizeof path - 1] = '\0';
    ggml_log_set(warnings_only, NULL);
    ggml_backend_load_all_from_path(dirname(path));
    ggml_log_set(NULL, NULL); /* back to ggml's default */
}
