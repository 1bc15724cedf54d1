/* sha256.h - SHA-256 (FIPS 180-4) of memory or a file, for run manifests. */
#ifndef KB_SHA256_H
#define KB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kb_base.h"

typedef struct kb_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} kb_sha256;

void sha256_init(kb_sha256 *s);
void sha256_update(kb_sha256 *s, const void *data, size_t n);
void sha256_final(kb_sha256 *s, char hex[65]);
/* Hash of a whole file as 64 hex digits + NUL. */
int sha256_file(const char *path, char hex[65], kb_err *err);

#endif
