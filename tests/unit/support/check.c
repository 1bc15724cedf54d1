/* check.c - counters and summary for check.h. */
#include "check.h"

int check_failures = 0, check_count = 0;

int check_summary(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, check_failures, check_count);
        return 1;
    }
    printf("%s: all %d checks ok\n", name, check_count);
    return 0;
}

static unsigned long long check_rs = 88172645463325252ULL;
double check_urand(void) {
    check_rs ^= check_rs << 13;
    check_rs ^= check_rs >> 7;
    check_rs ^= check_rs << 17;
    return (double)(check_rs >> 11) * (1.0 / 9007199254740992.0);
}
