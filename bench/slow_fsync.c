/* Makes every fsync and fdatasync of the process that preloads it take
 * WAYPOST_FSYNC_DELAY_US microseconds longer (default 1000): a slower disk,
 * for `python -m bench --suite store --fsync-delay-us N`. Both servers of the
 * store suite get it alike; the load generator does not.
 * Build: cc -shared -fPIC -O2 -o slow_fsync.so slow_fsync.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void delay(void) {
    const char *text = getenv("WAYPOST_FSYNC_DELAY_US");
    long us = text ? atol(text) : 1000;
    struct timespec pause = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&pause, NULL);
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
