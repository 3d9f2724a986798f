#ifndef TEST_PARALLELISM_H
#define TEST_PARALLELISM_H
/* Nothing to call: parallelism.c bounds how many tests run at once as the test binary loads. */
#endif
