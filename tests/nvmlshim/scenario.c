/* The NVML shim's scenario: GB10 defaults, then the lines of the file named by NVML_SHIM_SCENARIO.
 *
 * One setting per line, `KEY=VALUE`, optionally after a time offset: `@12.5 fault=GPU_IS_LOST` applies
 * from 12.5 s after the file was read. The latest line due wins; `#` starts a comment. The file is read
 * again whenever it changes (mtime, size or inode), and a rewrite restarts its clock and its Xid events.
 * Keys are listed in tests/nvmlshim/README.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "shim.h"

#define MAX_LINES 512
#define KEY_MAX 64

/* What a GB10 answers (tests/fixtures/captures/gb10-nvidia-smi.md); the file overrides any of it. */
static const char GB10[] =
    "driver=580.95.05\n"
    "nvml_version=13.580.95.05\n"
    "gpus=1\n"
    "name=NVIDIA GB10\n"
    "uuid=GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5\n"
    "pci_bus_id=0000000F:01:00.0\n"
    "temp=38\n"
    "slowdown=86\n"
    "shutdown=90\n"
    "gpu_max=99\n"
    "power_mw=11170\n"
    "power_limit_mw=NOT_SUPPORTED\n" /* GB10: limit getters are N/A */
    "sm_clock=2405\n"
    "app_clock=2418\n"
    "max_clock=3003\n"
    "util=0\n"
    "mem_util=0\n"
    "energy_mj=1200121000\n"
    "reasons=0x1\n"                           /* GPU idle */
    "memory=NOT_SUPPORTED\n"                  /* nvmlDeviceGetMemoryInfo and _v2 on GB10 */
    "fi.74=0\n"                               /* ..._CLOCKS_EVENT_REASON_SW_POWER_CAP, ns */
    "fi.269=173453251000\n"                   /* ..._SW_THERM_SLOWDOWN: the capture's 173453251 us */
    "fi.270=403805000\n"                      /* ..._HW_THERM_SLOWDOWN */
    "fi.271=0\n"                              /* ..._HW_POWER_BRAKE_SLOWDOWN */
    "event_types=0x8\n"                       /* nvmlEventTypeXidCriticalError */
    "compute=\n"
    "graphics=\n";

struct line {
    double at;
    int xid_taken;
    char key[KEY_MAX];
    char value[SHIM_VALUE_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct line lines[MAX_LINES];
static int n_lines = -1; /* -1: never loaded */
static double loaded_at;
static struct stat loaded_st;
static int loaded_ok;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r')) *--end = 0;
    return s;
}

static void parse_text(char *text, const char *origin) {
    int lineno = 0;
    for (char *save = NULL, *raw = strtok_r(text, "\n", &save); raw; raw = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *hash = strchr(raw, '#');
        if (hash) *hash = 0;
        char *s = trim(raw);
        if (!*s) continue;
        double at = 0;
        if (*s == '@') {
            char *rest;
            at = strtod(s + 1, &rest);
            if (rest == s + 1 || at < 0) {
                fprintf(stderr, "nvml shim: %s line %d: bad time offset: %s\n", origin, lineno, s);
                continue;
            }
            s = trim(rest);
        }
        char *eq = strchr(s, '=');
        if (!eq || eq == s || n_lines >= MAX_LINES) {
            fprintf(stderr, "nvml shim: %s line %d: not KEY=VALUE (or past %d lines): %s\n", origin, lineno,
                    MAX_LINES, s);
            continue;
        }
        *eq = 0;
        struct line *l = &lines[n_lines++];
        l->at = at;
        l->xid_taken = 0;
        snprintf(l->key, sizeof l->key, "%s", trim(s));
        snprintf(l->value, sizeof l->value, "%s", trim(eq + 1));
    }
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len <= 1) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf) buf[len] = 0;
    return buf;
}

/* Called with the lock held. */
static void reload_locked(void) {
    const char *path = getenv("NVML_SHIM_SCENARIO");
    struct stat st;
    int ok = path && *path && stat(path, &st) == 0;
    if (n_lines >= 0 && ok == loaded_ok &&
        (!ok || (st.st_mtim.tv_sec == loaded_st.st_mtim.tv_sec &&
                 st.st_mtim.tv_nsec == loaded_st.st_mtim.tv_nsec && st.st_size == loaded_st.st_size &&
                 st.st_ino == loaded_st.st_ino)))
        return;
    n_lines = 0;
    char defaults[sizeof GB10];
    memcpy(defaults, GB10, sizeof GB10);
    parse_text(defaults, "defaults");
    if (ok) {
        char *text = read_file(path);
        if (text) {
            parse_text(text, path);
            free(text);
        } else {
            fprintf(stderr, "nvml shim: cannot read %s: %s\n", path, strerror(errno));
        }
        loaded_st = st;
    } else if (path && *path && n_lines >= 0) {
        fprintf(stderr, "nvml shim: %s: %s (GB10 defaults only)\n", path, strerror(errno));
    }
    loaded_ok = ok;
    loaded_at = now_s();
}

void shim_refresh(void) {
    pthread_mutex_lock(&lock);
    reload_locked();
    pthread_mutex_unlock(&lock);
}

int shim_value(const char *key, char *out, size_t size) { return shim_value_since(key, out, size, NULL); }

int shim_value_since(const char *key, char *out, size_t size, double *since) {
    pthread_mutex_lock(&lock);
    reload_locked();
    double t = now_s() - loaded_at;
    const struct line *best = NULL;
    for (int i = 0; i < n_lines; i++)
        if (lines[i].at <= t && strcmp(lines[i].key, key) == 0 && (!best || lines[i].at >= best->at))
            best = &lines[i];
    if (best) snprintf(out, size, "%s", best->value);
    if (best && since) *since = t - best->at;
    pthread_mutex_unlock(&lock);
    return best != NULL;
}

#define E(name) {#name, NVML_ERROR_##name}
static const struct {
    const char *name;
    nvmlReturn_t code;
} ERRORS[] = {
    {"SUCCESS", NVML_SUCCESS}, E(UNINITIALIZED), E(INVALID_ARGUMENT), E(NOT_SUPPORTED), E(NO_PERMISSION),
    E(ALREADY_INITIALIZED), E(NOT_FOUND), E(INSUFFICIENT_SIZE), E(DRIVER_NOT_LOADED), E(TIMEOUT),
    E(IRQ_ISSUE), E(LIBRARY_NOT_FOUND), E(FUNCTION_NOT_FOUND), E(CORRUPTED_INFOROM), E(GPU_IS_LOST),
    E(RESET_REQUIRED), E(OPERATING_SYSTEM), E(LIB_RM_VERSION_MISMATCH), E(IN_USE), E(MEMORY), E(NO_DATA),
    E(ARGUMENT_VERSION_MISMATCH), E(NOT_READY), E(GPU_NOT_FOUND), E(INVALID_STATE), E(UNKNOWN),
};
#undef E

int shim_error_code(const char *text) {
    if (strncmp(text, "NVML_ERROR_", 11) == 0) text += 11;
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (strcmp(text, ERRORS[i].name) == 0) return (int)ERRORS[i].code;
    char *end;
    long v = strtol(text, &end, 10);
    return (*text && !*end && v >= 0) ? (int)v : -1;
}

const char *shim_error_name(nvmlReturn_t code) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == code) return ERRORS[i].name;
    return NULL;
}

nvmlReturn_t shim_number(const char *key, unsigned long long *out, nvmlReturn_t dflt_ret) {
    char v[SHIM_VALUE_MAX];
    double since = 0;
    if (!shim_value_since(key, v, sizeof v, &since) || !*v) return dflt_ret;
    char *end, *unit;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 0);
    if (end != v && !*end && !errno) {
        *out = n;
        return NVML_SUCCESS;
    }
    if (end != v && *end == '+' && !errno) { /* a counter: fi.269=173453251000+500000000/s */
        double rate = strtod(end + 1, &unit);
        if (unit != end + 1 && strcmp(unit, "/s") == 0 && rate >= 0) {
            *out = n + (unsigned long long)(rate * since);
            return NVML_SUCCESS;
        }
    }
    int code = shim_error_code(v);
    if (code < 0) {
        fprintf(stderr, "nvml shim: %s=%s is neither a number nor an NVML error name\n", key, v);
        return NVML_ERROR_UNKNOWN;
    }
    return (nvmlReturn_t)code;
}

int shim_take_due_xids(unsigned int *gpus, unsigned long long *codes, int max) {
    int n = 0;
    pthread_mutex_lock(&lock);
    reload_locked();
    double t = now_s() - loaded_at;
    for (int i = 0; i < n_lines && n < max; i++) {
        struct line *l = &lines[i];
        if (l->xid_taken || l->at > t || strcmp(l->key, "xid") != 0) continue;
        l->xid_taken = 1;
        char *colon;
        codes[n] = strtoull(l->value, &colon, 10); /* `xid=79` on GPU 0, `xid=79:1` on GPU 1 */
        gpus[n] = *colon == ':' ? (unsigned int)strtoul(colon + 1, NULL, 10) : 0;
        n++;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

nvmlReturn_t shim_guard(const char *fn) {
    char key[KEY_MAX + 16], v[SHIM_VALUE_MAX];
    snprintf(key, sizeof key, "hang.%s", fn);
    if (shim_value(key, v, sizeof v) || shim_value("hang", v, sizeof v)) {
        double s = strtod(v, NULL);
        if (s > 0) {
            struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
    snprintf(key, sizeof key, "fault.%s", fn);
    if ((shim_value(key, v, sizeof v) || shim_value("fault", v, sizeof v)) && *v) {
        int code = shim_error_code(v);
        return code < 0 ? NVML_ERROR_UNKNOWN : (nvmlReturn_t)code;
    }
    return NVML_SUCCESS;
}
