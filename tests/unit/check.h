/* check.h - a tiny test framework: CHECK macros count failures and print
 * file:line with the values; main() ends with `return check_summary();`.
 * Tests print "ok"/"FAIL" lines so a failing run says what differed. */
#ifndef KB_CHECK_H
#define KB_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

extern int check_failures, check_count;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        check_count++;                                                                  \
        if (!(cond)) {                                                                  \
            check_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                               \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        check_count++;                                                                  \
        if (!(cond)) {                                                                  \
            check_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                               \
            fprintf(stderr, "\n");                                                      \
        }                                                                               \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                \
        long long _a = (long long)(a), _b = (long long)(b);                             \
        check_count++;                                                                  \
        if (_a != _b) {                                                                 \
            check_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, \
                    #a, #b, _a, _b);                                                    \
        }                                                                               \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, atol, rtol)                                                   \
    do {                                                                                \
        double _a = (double)(a), _b = (double)(b);                                      \
        check_count++;                                                                  \
        if (!(fabs(_a - _b) <= (atol) + (rtol)*fabs(_b))) {                             \
            check_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s ~= %s (%.9g vs %.9g)\n", __FILE__, __LINE__, \
                    #a, #b, _a, _b);                                                    \
        }                                                                               \
    } while (0)

#define CHECK_STREQ(a, b)                                                               \
    do {                                                                                \
        const char *_a = (a), *_b = (b);                                                \
        check_count++;                                                                  \
        if (!_a || !_b || strcmp(_a, _b)) {                                             \
            check_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s == %s (\"%s\" vs \"%s\")\n", __FILE__,        \
                    __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");          \
        }                                                                               \
    } while (0)

int check_summary(const char *name);
/* Uniform in [0, 1): xorshift64 from a fixed seed, so every test binary
 * draws the same sequence run after run. */
double check_urand(void);

#endif
