/* registry.c - method names -> ops tables. The only place that knows the
 * list of methods; everything else goes through method_find(). */
#include <stdio.h>
#include <string.h>

#include "methods/method.h"

extern const kb_method_ops kb_method_full, kb_method_exact_topk, kb_method_snapkv,
    kb_method_snapkvpp, kb_method_quest, kb_method_sparq, kb_method_hybrid, kb_method_rocketkv,
    kb_method_rocketkv_mt;

static const kb_method_ops *const methods[] = {
    &kb_method_full,   &kb_method_exact_topk, &kb_method_snapkv,
    &kb_method_snapkvpp, &kb_method_quest,    &kb_method_sparq,
    &kb_method_hybrid, &kb_method_rocketkv,   &kb_method_rocketkv_mt,
};

const kb_method_ops *method_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i]->name, name)) return methods[i];
    return NULL;
}

int method_count(void) { return (int)(sizeof methods / sizeof methods[0]); }

const kb_method_ops *method_at(int i) {
    return i >= 0 && i < method_count() ? methods[i] : NULL;
}

const char *method_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t off = 0;
        for (int i = 0; i < method_count(); i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "",
                                    methods[i]->name);
    }
    return buf;
}
