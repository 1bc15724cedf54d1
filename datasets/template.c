/* template.c - prompt wording as data: loading configs/prompts/<family>.json
 * (or a task's own "prompts" file) and str.format-style substitution, so the
 * official template strings of a benchmark can be pasted in unchanged. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/ds_internal.h"
#include "harness/json.h"

int tpl_uses(const char *tpl, const char *name) {
    size_t len = strlen(name);
    for (const char *p = tpl; *p;) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            p += 2; /* a literal brace */
        } else if (p[0] == '{') {
            const char *e = strchr(p, '}');
            if (!e) return 0;
            if ((size_t)(e - p - 1) == len && !strncmp(p + 1, name, len)) return 1;
            p = e + 1;
        } else {
            p++;
        }
    }
    return 0;
}

int tpl_format(const char *tpl, const tpl_var *vars, int nvars, const char *where, char **out,
               kb_err *err) {
    sbuf b = {0};
    for (const char *p = tpl; *p;) {
        if (p[0] == '{' && p[1] == '{') {
            sb_putc(&b, '{');
            p += 2;
        } else if (p[0] == '}' && p[1] == '}') {
            sb_putc(&b, '}');
            p += 2;
        } else if (p[0] == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                sb_free(&b);
                return kb_fail(err, KB_EINPUT, "%s: unmatched '{' in template", where);
            }
            size_t n = (size_t)(e - p - 1);
            int found = 0;
            for (int i = 0; i < nvars; i++)
                if (strlen(vars[i].name) == n && !strncmp(vars[i].name, p + 1, n)) {
                    sb_put(&b, vars[i].value);
                    found = 1;
                    break;
                }
            if (!found) {
                char names[512] = "";
                for (int i = 0; i < nvars; i++) {
                    strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                    strncat(names, vars[i].name, sizeof names - strlen(names) - 1);
                }
                sb_free(&b);
                return kb_fail(err, KB_EINPUT,
                               "%s: unknown placeholder '{%.*s}' in template (available: %s)",
                               where, (int)(n < 64 ? n : 64), p + 1, names);
            }
            p = e + 1;
        } else if (p[0] == '}') {
            sb_free(&b);
            return kb_fail(err, KB_EINPUT, "%s: single '}' in template (write '}}')", where);
        } else {
            const char *q = p;
            while (*q && *q != '{' && *q != '}') q++;
            sb_putn(&b, p, (size_t)(q - p));
            p = q;
        }
    }
    *out = sb_take(&b);
    return 0;
}

const char *ds_configs_dir(const kb_dataset_env *env) {
    static char found[PATH_MAX + 16];
    if (env && env->configs_dir && *env->configs_dir) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/prompts", env->configs_dir);
        if (ds_file_exists(probe)) return env->configs_dir;
    }
    const char *e = getenv("KVBENCH_CONFIGS");
    if (e && *e) return e;
    /* the binary lives in <repo>/<build>/kvbench: try <repo>/configs */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = 0;
            char probe[PATH_MAX + 32];
            snprintf(probe, sizeof probe, "%s/configs/prompts", exe);
            if (ds_file_exists(probe)) {
                snprintf(found, sizeof found, "%s/configs", exe);
                return found;
            }
        }
    }
    return env && env->configs_dir && *env->configs_dir ? env->configs_dir : "configs";
}

int wording_load(const cJSON *cfg, const kb_dataset_env *env, const char *family,
                 ds_wording *w, kb_err *err) {
    memset(w, 0, sizeof *w);
    const char *custom = NULL;
    int rc = json_get_path(cfg, "task config", "prompts", 0, NULL, &custom, err);
    if (rc) return rc;
    if (custom) {
        char *p = ds_data_path(env, custom);
        rc = ds_path_copy(w->path, sizeof w->path, p, "prompt wording file", err);
        free(p);
    } else {
        sbuf b = {0};
        sb_printf(&b, "%s/prompts/%s.json", ds_configs_dir(env), family);
        rc = ds_path_copy(w->path, sizeof w->path, b.s, "prompt wording file", err);
        free(b.s);
    }
    if (rc) return rc;
    rc = json_load_file(w->path, &w->root, err);
    if (rc) {
        if (!custom)
            kb_err_prefix(err, "prompt wording for %s (set $KVBENCH_CONFIGS to the configs/ "
                               "directory)", family);
        return rc;
    }
    /* the provenance names the file read, wherever the run was started */
    char *abs = realpath(w->path, NULL);
    if (abs && strlen(abs) < sizeof w->path) memcpy(w->path, abs, strlen(abs) + 1);
    free(abs);
    if (!cJSON_IsObject(w->root)) {
        cJSON_Delete(w->root);
        w->root = NULL;
        return kb_fail(err, KB_EINPUT, "%s: expected a JSON object of prompt templates", w->path);
    }
    return 0;
}

void wording_free(ds_wording *w) {
    cJSON_Delete(w->root);
    w->root = NULL;
}

int wording_get(const ds_wording *w, const char *section, const char *key, const char **out,
                kb_err *err) {
    const cJSON *obj = w->root;
    if (section) {
        obj = cJSON_GetObjectItemCaseSensitive(w->root, section);
        if (!cJSON_IsObject(obj))
            return kb_fail(err, KB_EINPUT, "%s: missing object '%s'", w->path, section);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v))
        return kb_fail(err, KB_EINPUT, "%s: %s%s'%s': expected a string", w->path,
                       section ? section : "", section ? "." : "", key);
    *out = v->valuestring;
    return 0;
}
