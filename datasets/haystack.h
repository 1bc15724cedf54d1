/* haystack.h - the text corpora of the synthetic tasks, from Debian packages
 * the set-up installs (no internet needed) or a user folder:
 *   prose (haystacks): --haystack DIR (*.txt, sorted by name), else
 *     fortunes-min (/usr/share/games/fortunes: fortunes, literature, riddles),
 *     else WordNet glosses (/usr/share/wordnet/data.*), else
 *     /usr/share/common-licenses (always present on Debian);
 *   words (keys, CWE words): WordNet index.adj / index.noun / index.verb,
 *     lemmas of 3-10 letters a-z seen at least once in the SemCor sense-tagged
 *     corpus (tagsense_cnt >= 1, so common words), else
 *     /usr/share/dict/american-english (wamerican).
 * Corpora are loaded once per process and shared (read-only). */
#ifndef KB_HAYSTACK_H
#define KB_HAYSTACK_H

#include "kernels/kb_base.h"

typedef struct kb_prose {
    char **words; /* [n] the corpus as whitespace-separated words, in order */
    int n;
    char desc[4400]; /* which corpus (the whole --haystack path: provenance), e.g. "fortunes-min:/usr/share/games/fortunes" */
} kb_prose;

typedef struct kb_wordlist {
    char **w; /* [n] distinct lowercase words, sorted */
    int n;
    char desc[160];
} kb_wordlist;

/* The prose corpus for this --haystack value (NULL: Debian corpora; "": an
 * error). `from` names where the value came from in messages (NULL:
 * "--haystack"; a sweep: "key 'haystack'"). */
int prose_get(const char *haystack_dir, const char *from, const kb_prose **out, kb_err *err);
/* pos: "adj", "noun" or "verb". */
int words_get(const char *pos, const kb_wordlist **out, kb_err *err);

#endif
