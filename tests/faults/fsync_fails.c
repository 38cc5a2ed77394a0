/* Preloaded into `serve` by tests/test_commit_fault.py: while the file named
 * by $WAYPOST_TEST_FSYNC_FLAG exists, fsync and fdatasync of a database's
 * -wal file fail with EIO (a failing device), doing nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failing(int fd) {
    const char *flag = getenv("WAYPOST_TEST_FSYNC_FLAG");
    if (flag == NULL || access(flag, F_OK) != 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 4) return 0;
    path[n] = 0;
    return strcmp(path + n - 4, "-wal") == 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}
