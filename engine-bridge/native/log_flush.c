/*
 * Loaded (LD_PRELOAD) into llama.cpp's command-line tools such as
 * llama-perplexity, so that what they log reaches their output before they
 * exit.
 *
 * llama.cpp's tools log through one background thread that is never joined
 * (common/log.cpp leaks it on purpose), and llama-perplexity returns from
 * main without calling common_log_flush(): on a busy machine the process
 * exits before that thread has written the last lines, and the final
 * estimate is lost. The tools call llama_backend_free() just before they
 * return, so this library stands in for it: it calls the real one, then
 * stops the logger thread, which first writes everything queued.
 *
 * The logger's functions are looked up when needed, so a llama.cpp without
 * them loses nothing but this fix.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

typedef void (*backend_free_fn)(void);
typedef void *(*log_main_fn)(void);
typedef void (*log_pause_fn)(void *);

void llama_backend_free(void) {
    backend_free_fn real = (backend_free_fn)dlsym(RTLD_NEXT, "llama_backend_free");
    if (real) {
        real();
    }
    /* common_log_main() and common_log_pause(common_log *), as C++ names. */
    log_main_fn log_main = (log_main_fn)dlsym(RTLD_DEFAULT, "_Z15common_log_mainv");
    log_pause_fn log_pause = (log_pause_fn)dlsym(RTLD_DEFAULT, "_Z16common_log_pauseP10common_log");
    if (log_main && log_pause) {
        log_pause(log_main());
    }
}
