/*
 * Bounds how many tests swift-testing runs at once, for plain `swift test`.
 *
 * swift-testing starts every test of the process together unless SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH
 * says otherwise. Most of Docket's tests run a server with its own database; on a two-core machine five hundred of
 * them at once each took nearly as long as the whole run, so their time limits (and the server's own bounds, such
 * as a write giving up after waiting 4 s for its turn) decided the result instead of the code. Four tests per core
 * (at least eight) keep both cores busy. Runs as the test binary loads, before swift-testing reads its
 * configuration; a width set by whoever runs the tests is kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void docket_bound_test_parallelism(void) {
    const char *name = "SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH";
    if (getenv(name) != NULL) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long width = cores > 2 ? cores * 4 : 8;
    char value[32];
    snprintf(value, sizeof value, "%ld", width);
    setenv(name, value, 0);
}
