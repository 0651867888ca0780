/*
 * A test NVML: exports the NVML symbols topolink calls and answers them from a machine profile.
 *
 * The profile is a line file (written by tests/fakenvml/_profile.py from a YAML machine profile) named by
 * $TOPOLINK_FAKENVML_PROFILE, read at each nvmlInit that takes the reference count from 0 to 1. Unknown
 * facts answer NVML_ERROR_NOT_SUPPORTED, as real NVML does for a feature the GPU lacks.
 *
 * Behaviour callers depend on, as real NVML has it:
 *  - handles are opaque pointers; a handle not made here is INVALID_ARGUMENT;
 *  - a link index at or past the GPU's link count is INVALID_ARGUMENT (callers loop until it);
 *  - nvmlDeviceGetGpuFabricInfoV accepts struct versions 2 (0x02000024) and 3 (0x03000028) and writes
 *    only (version & 0xFFFFFF) bytes; any other version is ARGUMENT_VERSION_MISMATCH;
 *  - a lost GPU answers GPU_IS_LOST to every call that names it, pair calls included;
 *  - compute processes and utilisation answer as on an idle GPU (none, 0%) unless the profile says it is busy.
 *
 * Test hooks: "error" lines inject a return code per function, GPU and link, on every matching call, only
 * on the n-th, or on the first n (nvmlInitWithFlags counts the inits of the process, so a profile can model
 * a driver that loads while the caller retries); "lose" lines make a GPU fall off the bus at its n-th call
 * of a function. Every call is counted per function and arguments;
 * "count first-sequence-number function(args)" lines are written to $TOPOLINK_FAKENVML_CALLS at the
 * nvmlShutdown that ends a session, or on demand with fakenvml_dump_calls().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 128
#define MAX_LINKS 64
#define MAX_MIG 16
#define MAX_FIELDS 16
#define MAX_RULES 256
#define MAX_P2P_INDEX 6
#define CPU_WORDS 64
#define NODE_WORDS 16
#define MAGIC 0x4e564d4cu /* "NVML" */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlPlatformInfo_v2_t (GB200/GB300 trays): which rack (chassis serial), slot, tray, host and module. */
typedef struct {
    unsigned int version;
    unsigned char ibGuid[16];
    unsigned char chassisSerialNumber[16];
    unsigned char slotNumber;
    unsigned char trayIndex;
    unsigned char hostId;
    unsigned char peerType;
    unsigned char moduleId;
} platform_v2_t;

/* The newest fabric struct (v3); v2 is its first 36 bytes. */
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary;
} fabric_v3_t;

typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} fabric_v1_t;

typedef struct {
    int present, state;
    unsigned int version, remote_type;
    nvmlPciInfo_t remote;
} link_t;

typedef struct device {
    unsigned int magic;
    int index;
    int is_mig;
    struct device *parent;
    nvmlPciInfo_t pci;
    int has_pci;
    char name[96], uuid[96];
    int has_name, has_uuid;
    unsigned long long memory;
    int has_memory;
    unsigned int minor;
    int has_minor;
    int numa, has_numa;
    unsigned long cpus[CPU_WORDS];
    int has_cpus;
    unsigned long nodes[NODE_WORDS];
    int has_nodes;
    int cc_major, cc_minor, has_cc;
    unsigned int arch;
    int has_arch;
    unsigned int pcie[4];
    int has_pcie;
    unsigned int mig_current, mig_pending, mig_max;
    int has_mig;
    struct device *mig[MAX_MIG];
    unsigned int gi, ci;
    fabric_v3_t fabric;
    int has_fabric;
    platform_v2_t platform;
    int has_platform;
    unsigned int fabric_max_version; /* 0: any; 2: an older driver that knows only the v2 struct */
    int nlinks, has_links;
    link_t links[MAX_LINKS];
    unsigned int field_id[MAX_FIELDS];
    int field_ret[MAX_FIELDS];
    unsigned int field_value[MAX_FIELDS];
    int nfields;
    int lost;
    unsigned int procs, util_gpu, util_memory; /* busy: compute processes, utilisation percent */
} device_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    char func[64];
    int gpu, link, code;
    int nth;   /* > 0: only the nth matching call fails */
    int first; /* > 0: only the first `first` matching calls fail */
    int seen;  /* matching calls so far (this session) */
} error_rule_t;

typedef struct {
    char func[64];
    int gpu, nth, seen;
} lose_rule_t;

static device_t g_gpus[MAX_GPUS];
static device_t g_migs[MAX_GPUS][MAX_MIG];
static int g_count;
static int g_refcount;
static char g_driver[80] = "", g_nvml[80] = "";
static int g_cuda = -1;
static int g_ancestor[MAX_GPUS][MAX_GPUS];
static signed char g_p2p[MAX_GPUS][MAX_GPUS][MAX_P2P_INDEX];
static error_rule_t g_errors[MAX_RULES];
static int g_nerrors;
static lose_rule_t g_loses[MAX_RULES];
static int g_nloses;
static int g_init_sessions; /* nvmlInitWithFlags calls that tried to open a session on this profile */
static char g_init_profile[4096];

/* ---- call counting: an open-addressing table of "function(args)" -> count, doubled when half full ----
 * It grows with the distinct calls (a few thousand for an 8-GPU node: well under a MiB), so the process
 * that loads this library is not charged for room it never uses (benchmarks/serve.py measures the agent's
 * resident size with this library loaded). A call the table cannot take (no memory) is not counted. */

#define CALL_SLOTS_FIRST 1024
typedef struct {
    char key[96];
    unsigned int count;
    unsigned long first; /* sequence number of the first such call in the session */
} call_slot_t;
static call_slot_t *g_calls;
static unsigned long g_call_slots, g_call_keys;
static unsigned long g_total_calls;

static unsigned long call_hash(const char *key) {
    unsigned long h = 5381;
    for (const char *p = key; *p; p++) h = h * 33u + (unsigned char)*p;
    return h;
}

static call_slot_t *call_slot(call_slot_t *table, unsigned long slots, const char *key) {
    for (unsigned long i = call_hash(key) % slots;; i = (i + 1) % slots)
        if (table[i].count == 0 || strcmp(table[i].key, key) == 0) return &table[i];
}

static int calls_room(void) {
    if (g_calls != NULL && 2 * (g_call_keys + 1) <= g_call_slots) return 1;
    unsigned long slots = g_calls == NULL ? CALL_SLOTS_FIRST : 2 * g_call_slots;
    call_slot_t *table = calloc(slots, sizeof(call_slot_t));
    if (table == NULL) return 0;
    for (unsigned long i = 0; i < g_call_slots; i++)
        if (g_calls[i].count) *call_slot(table, slots, g_calls[i].key) = g_calls[i];
    free(g_calls);
    g_call_slots = slots;
    g_calls = table;
    return 1;
}

static void count_call(const char *key) {
    g_total_calls++;
    if (!calls_room()) return;
    call_slot_t *s = call_slot(g_calls, g_call_slots, key);
    if (s->count++ == 0) {
        snprintf(s->key, sizeof s->key, "%s", key);
        s->first = g_total_calls - 1;
        g_call_keys++;
    }
}

int fakenvml_dump_calls(const char *path) {
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    for (unsigned long i = 0; g_calls != NULL && i < g_call_slots; i++)
        if (g_calls[i].count) fprintf(f, "%u %lu %s\n", g_calls[i].count, g_calls[i].first, g_calls[i].key);
    fclose(f);
    return 0;
}

void fakenvml_reset_calls(void) {
    free(g_calls);
    g_calls = NULL;
    g_call_slots = g_call_keys = g_total_calls = 0;
}

unsigned long fakenvml_total_calls(void) { return g_total_calls; }

/* ---- the profile ---- */

static void parse_list(const char *text, unsigned long *words, int nwords) {
    memset(words, 0, sizeof(unsigned long) * (size_t)nwords);
    const char *p = text;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p) break;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            p = end;
        }
        for (long c = lo; c <= hi && c >= 0 && c < (long)(nwords * 64); c++)
            words[c / 64] |= 1ul << (c % 64);
        if (*p == ',') p++;
        else break;
    }
}

static void set_pci(nvmlPciInfo_t *pci, const char *busid) {
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    memset(pci, 0, sizeof *pci);
    sscanf(busid, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", domain, bus, dev);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain & 0xffffu, bus, dev);
}

static int gpu_arg(const char *tok) { return strcmp(tok, "*") == 0 ? -1 : atoi(tok); }

static void reset_profile(void) {
    /* Only the entries the last profile used (BSS starts zeroed): clearing the whole tables would make every
     * process that loads this library resident in 15 MB of zeros, which the serve benchmark would count. */
    memset(g_gpus, 0, (size_t)g_count * sizeof g_gpus[0]);
    memset(g_migs, 0, (size_t)g_count * sizeof g_migs[0]);
    memset(g_ancestor, 0, sizeof g_ancestor);
    memset(g_p2p, -1, sizeof g_p2p);
    g_count = 0;
    g_nerrors = g_nloses = 0;
    g_driver[0] = g_nvml[0] = '\0';
    g_cuda = -1;
}

static int parse_gpu_line(device_t *d, int index, const char *key, char *rest) {
    if (strcmp(key, "busid") == 0) {
        char busid[64];
        unsigned int devid, subsys;
        if (sscanf(rest, "%63s %x %x", busid, &devid, &subsys) != 3) return -1;
        set_pci(&d->pci, busid);
        d->pci.pciDeviceId = devid;
        d->pci.pciSubSystemId = subsys;
        d->has_pci = 1;
    } else if (strcmp(key, "name") == 0) {
        snprintf(d->name, sizeof d->name, "%s", rest);
        d->has_name = 1;
    } else if (strcmp(key, "uuid") == 0) {
        snprintf(d->uuid, sizeof d->uuid, "%s", rest);
        d->has_uuid = 1;
    } else if (strcmp(key, "memory") == 0) {
        d->memory = strtoull(rest, NULL, 10);
        d->has_memory = 1;
    } else if (strcmp(key, "minor") == 0) {
        d->minor = (unsigned int)atoi(rest);
        d->has_minor = 1;
    } else if (strcmp(key, "numa") == 0) {
        d->numa = atoi(rest);
        d->has_numa = 1;
    } else if (strcmp(key, "cpus") == 0) {
        parse_list(rest, d->cpus, CPU_WORDS);
        d->has_cpus = 1;
    } else if (strcmp(key, "memnodes") == 0) {
        parse_list(rest, d->nodes, NODE_WORDS);
        d->has_nodes = 1;
    } else if (strcmp(key, "cc") == 0) {
        if (sscanf(rest, "%d %d", &d->cc_major, &d->cc_minor) != 2) return -1;
        d->has_cc = 1;
    } else if (strcmp(key, "arch") == 0) {
        d->arch = (unsigned int)atoi(rest);
        d->has_arch = 1;
    } else if (strcmp(key, "pcie") == 0) {
        if (sscanf(rest, "%u %u %u %u", &d->pcie[0], &d->pcie[1], &d->pcie[2], &d->pcie[3]) != 4) return -1;
        d->has_pcie = 1;
    } else if (strcmp(key, "mig") == 0) {
        if (sscanf(rest, "%u %u %u", &d->mig_current, &d->mig_pending, &d->mig_max) != 3) return -1;
        if (d->mig_max > MAX_MIG) d->mig_max = MAX_MIG;
        d->has_mig = 1;
    } else if (strcmp(key, "migdev") == 0) {
        unsigned int slot, gi, ci;
        unsigned long long mem;
        char uuid[96];
        int used = 0;
        if (sscanf(rest, "%u %u %u %llu %95s %n", &slot, &gi, &ci, &mem, uuid, &used) < 5 || slot >= MAX_MIG)
            return -1;
        device_t *m = &g_migs[index][slot];
        m->magic = MAGIC;
        m->index = index;
        m->is_mig = 1;
        m->parent = d;
        m->gi = gi;
        m->ci = ci;
        m->memory = mem;
        m->has_memory = 1;
        snprintf(m->uuid, sizeof m->uuid, "%s", uuid);
        m->has_uuid = 1;
        snprintf(m->name, sizeof m->name, "%s", rest + used);
        m->has_name = 1;
        d->mig[slot] = m;
    } else if (strcmp(key, "fabric") == 0) {
        unsigned int state, clique, health, summary;
        int status;
        char hex[40];
        if (sscanf(rest, "%u %d %u %32s %u %u", &state, &status, &clique, hex, &health, &summary) != 6) return -1;
        for (int i = 0; i < 16; i++) {
            unsigned int byte = 0;
            sscanf(hex + 2 * i, "%2x", &byte);
            d->fabric.clusterUuid[i] = (unsigned char)byte;
        }
        d->fabric.state = (unsigned char)state;
        d->fabric.status = status;
        d->fabric.cliqueId = clique;
        d->fabric.healthMask = health;
        d->fabric.healthSummary = (unsigned char)summary;
        d->has_fabric = 1;
    } else if (strcmp(key, "platform") == 0) {
        unsigned int slot, tray, host, peer, module;
        char serial[17];
        if (sscanf(rest, "%16s %u %u %u %u %u", serial, &slot, &tray, &host, &peer, &module) != 6) return -1;
        memset(&d->platform, 0, sizeof d->platform);
        memcpy(d->platform.chassisSerialNumber, serial, strlen(serial));
        d->platform.slotNumber = (unsigned char)slot;
        d->platform.trayIndex = (unsigned char)tray;
        d->platform.hostId = (unsigned char)host;
        d->platform.peerType = (unsigned char)peer;
        d->platform.moduleId = (unsigned char)module;
        d->has_platform = 1;
    } else if (strcmp(key, "busy") == 0) {
        if (sscanf(rest, "%u %u %u", &d->procs, &d->util_gpu, &d->util_memory) != 3) return -1;
    } else if (strcmp(key, "fabricmax") == 0) {
        d->fabric_max_version = (unsigned int)atoi(rest);
    } else if (strcmp(key, "links") == 0) {
        d->nlinks = atoi(rest);
        if (d->nlinks > MAX_LINKS) d->nlinks = MAX_LINKS;
        d->has_links = 1;
    } else if (strcmp(key, "link") == 0) {
        int l, state;
        unsigned int version, rtype;
        char busid[64];
        if (sscanf(rest, "%d %d %u %u %63s", &l, &state, &version, &rtype, busid) != 5 || l < 0 || l >= MAX_LINKS)
            return -1;
        link_t *k = &d->links[l];
        k->present = 1;
        k->state = state;
        k->version = version;
        k->remote_type = rtype;
        set_pci(&k->remote, busid);
        if (strcmp(busid, "FFFFFFFF:FF:FF.0") == 0) k->remote.domain = 0xFFFFFFFFu;
    } else if (strcmp(key, "field") == 0) {
        if (d->nfields >= MAX_FIELDS) return -1;
        if (sscanf(rest, "%u %d %u", &d->field_id[d->nfields], &d->field_ret[d->nfields],
                   &d->field_value[d->nfields]) != 3)
            return -1;
        d->nfields++;
    } else {
        return -1;
    }
    return 0;
}

static int load_profile(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    reset_profile();
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') continue;
        char word[64] = "", a[64] = "", b[64] = "", c[64] = "";
        int used = 0, bad = 0;
        sscanf(line, "%63s %n", word, &used);
        char *rest = line + used;
        if (strcmp(word, "gpu") == 0) {
            int i, n = 0;
            if (sscanf(rest, "%d %63s %n", &i, a, &n) < 2 || i < 0 || i >= MAX_GPUS) {
                bad = 1;
            } else {
                device_t *d = &g_gpus[i];
                d->magic = MAGIC;
                d->index = i;
                if (i + 1 > g_count) g_count = i + 1;
                bad = parse_gpu_line(d, i, a, rest + n) != 0;
            }
        } else if (strcmp(word, "driver") == 0) {
            snprintf(g_driver, sizeof g_driver, "%s", rest);
        } else if (strcmp(word, "nvml") == 0) {
            snprintf(g_nvml, sizeof g_nvml, "%s", rest);
        } else if (strcmp(word, "cuda") == 0) {
            g_cuda = atoi(rest);
        } else if (strcmp(word, "pair") == 0) {
            int x, y, k, n = 0, v1 = 0, v2 = 0;
            n = sscanf(rest, "%d %d %63s %d %d", &x, &y, a, &v1, &v2);
            if (n < 4 || x < 0 || y < 0 || x >= MAX_GPUS || y >= MAX_GPUS) {
                bad = 1;
            } else if (strcmp(a, "ancestor") == 0) {
                g_ancestor[x][y] = v1;
            } else if (strcmp(a, "p2p") == 0 && n == 5 && v1 >= 0 && v1 < MAX_P2P_INDEX) {
                k = v1;
                g_p2p[x][y][k] = (signed char)v2;
            } else {
                bad = 1;
            }
        } else if (strcmp(word, "error") == 0 && g_nerrors < MAX_RULES) {
            error_rule_t *r = &g_errors[g_nerrors];
            int nth = 0, first = 0;
            int got = sscanf(rest, "%63s %63s %63s %63s %d %d", r->func, a, b, c, &nth, &first);
            if (got != 4 && got != 6) {
                bad = 1;
            } else {
                r->gpu = gpu_arg(a);
                r->link = gpu_arg(b);
                r->code = atoi(c);
                r->nth = nth;
                r->first = first;
                r->seen = 0;
                g_nerrors++;
            }
        } else if (strcmp(word, "lose") == 0 && g_nloses < MAX_RULES) {
            lose_rule_t *r = &g_loses[g_nloses];
            if (sscanf(rest, "%d %63s %d", &r->gpu, r->func, &r->nth) != 3) {
                bad = 1;
            } else {
                r->seen = 0;
                g_nloses++;
            }
        } else if (strcmp(word, "fakenvml") != 0) {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "fakenvml: %s:%d: cannot parse: %s\n", path, lineno, line);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/* ---- the gate every call passes ---- */

static device_t *as_device(const void *handle) {
    const device_t *d = handle;
    if (d == NULL) return NULL;
    int in_gpus = d >= &g_gpus[0] && d < &g_gpus[MAX_GPUS];
    int in_migs = (const void *)d >= (const void *)&g_migs[0][0] &&
                  (const void *)d < (const void *)&g_migs[MAX_GPUS][0];
    if (!(in_gpus || in_migs) || d->magic != MAGIC) return NULL;
    return (device_t *)d;
}

static device_t *physical(device_t *d) { return d != NULL && d->is_mig ? d->parent : d; }

static void apply_lose_rules(const char *func, device_t *d) {
    if (d == NULL) return;
    for (int i = 0; i < g_nloses; i++) {
        lose_rule_t *r = &g_loses[i];
        if (r->gpu == d->index && strcmp(r->func, func) == 0 && ++r->seen >= r->nth) d->lost = 1;
    }
}

static int injected(const char *func, const device_t *d1, const device_t *d2, int link) {
    int init = strcmp(func, "nvmlInitWithFlags") == 0;
    for (int i = 0; i < g_nerrors; i++) {
        error_rule_t *r = &g_errors[i];
        if (strcmp(r->func, func) != 0) continue;
        int gpu_ok = r->gpu == -1 || (d1 != NULL && d1->index == r->gpu) || (d2 != NULL && d2->index == r->gpu);
        int link_ok = r->link == -1 || r->link == link;
        if (!(gpu_ok && link_ok)) continue;
        int seen = init ? g_init_sessions : ++r->seen;
        if (r->nth > 0 && seen != r->nth) continue;
        if (r->first > 0 && seen > r->first) continue;
        return r->code;
    }
    return NVML_SUCCESS;
}

/*
 * Count the call as "func(args)", check the library is initialised and the handles are ours, fire lose
 * and error rules. h2 is NULL unless two is set; link is -1 when the call takes none; extra (-1 for none)
 * is one more integer argument that makes calls distinct (a P2P caps index, a MIG slot, an affinity scope);
 * tag, when not NULL, is appended to the function name in the count only (field ids).
 */
static nvmlReturn_t enter(const char *func, const char *tag, const void *h1, const void *h2, int two, int link,
                          int extra, device_t **out1, device_t **out2) {
    char key[160], args[64];
    device_t *d1 = as_device(h1), *d2 = as_device(h2);
    int used = 0;
    if (d1 == NULL) used = snprintf(args, sizeof args, "?");
    else used = snprintf(args, sizeof args, d1->is_mig ? "%d/mig%u" : "%d", d1->index, d1->gi);
    if (two) used += snprintf(args + used, sizeof args - (size_t)used, d2 != NULL ? ",%d" : ",?", d2 ? d2->index : 0);
    if (link >= 0) used += snprintf(args + used, sizeof args - (size_t)used, ",%d", link);
    if (extra >= 0) snprintf(args + used, sizeof args - (size_t)used, ",%d", extra);
    snprintf(key, sizeof key, "%s%s(%s)", func, tag ? tag : "", args);
    count_call(key);
    if (g_refcount == 0) return NVML_ERROR_UNINITIALIZED;
    if (d1 == NULL || (two && d2 == NULL)) return NVML_ERROR_INVALID_ARGUMENT;
    apply_lose_rules(func, physical(d1));
    if (two) apply_lose_rules(func, d2);
    if (physical(d1)->lost || (two && d2->lost)) return NVML_ERROR_GPU_IS_LOST;
    int code = injected(func, physical(d1), two ? d2 : NULL, link);
    if (code != NVML_SUCCESS) return code;
    *out1 = d1;
    if (out2 != NULL) *out2 = d2;
    return NVML_SUCCESS;
}

#define ENTER1(func, h) \
    device_t *d = NULL; \
    nvmlReturn_t rc_ = enter(func, NULL, h, NULL, 0, -1, -1, &d, NULL); \
    if (rc_ != NVML_SUCCESS) return rc_

#define ENTER_LINK(func, h, link) \
    device_t *d = NULL; \
    nvmlReturn_t rc_ = enter(func, NULL, h, NULL, 0, (int)(link), -1, &d, NULL); \
    if (rc_ != NVML_SUCCESS) return rc_

static nvmlReturn_t system_call(const char *func) {
    count_call(func);
    if (g_refcount == 0) return NVML_ERROR_UNINITIALIZED;
    return injected(func, NULL, NULL, -1);
}

static nvmlReturn_t copy_string(char *dst, unsigned int len, const char *src) {
    if (dst == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ---- init and system ---- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (g_refcount == 0) {
        const char *path = getenv("TOPOLINK_FAKENVML_PROFILE");
        fakenvml_reset_calls();
        count_call("nvmlInitWithFlags");
        if (path != NULL && strncmp(path, g_init_profile, sizeof g_init_profile) != 0) {
            snprintf(g_init_profile, sizeof g_init_profile, "%s", path); /* another machine: count afresh */
            g_init_sessions = 0;
        }
        g_init_sessions++;
        if (path == NULL || *path == '\0') return NVML_ERROR_DRIVER_NOT_LOADED;
        if (load_profile(path) != 0) return NVML_ERROR_UNKNOWN;
        int code = injected("nvmlInitWithFlags", NULL, NULL, -1);
        if (code != NVML_SUCCESS) return code;
    } else {
        count_call("nvmlInitWithFlags");
    }
    g_refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    count_call("nvmlShutdown");
    if (g_refcount == 0) return NVML_ERROR_UNINITIALIZED;
    if (--g_refcount == 0) {
        const char *out = getenv("TOPOLINK_FAKENVML_CALLS");
        if (out != NULL && *out != '\0') fakenvml_dump_calls(out);
    }
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    nvmlReturn_t rc = system_call("nvmlSystemGetDriverVersion");
    if (rc != NVML_SUCCESS) return rc;
    return g_driver[0] ? copy_string(version, length, g_driver) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    nvmlReturn_t rc = system_call("nvmlSystemGetNVMLVersion");
    if (rc != NVML_SUCCESS) return rc;
    return g_nvml[0] ? copy_string(version, length, g_nvml) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    nvmlReturn_t rc = system_call("nvmlSystemGetCudaDriverVersion");
    if (rc != NVML_SUCCESS) return rc;
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (g_cuda < 0) return NVML_ERROR_NOT_SUPPORTED;
    *version = g_cuda;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    nvmlReturn_t rc = system_call("nvmlDeviceGetCount_v2");
    if (rc != NVML_SUCCESS) return rc;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)g_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
    char key[64];
    snprintf(key, sizeof key, "nvmlDeviceGetHandleByIndex_v2(%u)", index);
    count_call(key);
    if (g_refcount == 0) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= (unsigned int)g_count) return NVML_ERROR_INVALID_ARGUMENT;
    device_t *d = &g_gpus[index];
    apply_lose_rules("nvmlDeviceGetHandleByIndex_v2", d);
    if (d->lost) return NVML_ERROR_GPU_IS_LOST;
    int code = injected("nvmlDeviceGetHandleByIndex_v2", d, NULL, -1);
    if (code != NVML_SUCCESS) return code;
    *device = d;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, void **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ---- per device ---- */

nvmlReturn_t nvmlDeviceGetIndex(void *device, unsigned int *index) {
    ENTER1("nvmlDeviceGetIndex", device);
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length) {
    ENTER1("nvmlDeviceGetUUID", device);
    return d->has_uuid ? copy_string(uuid, length, d->uuid) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetName(void *device, char *name, unsigned int length) {
    ENTER1("nvmlDeviceGetName", device);
    return d->has_name ? copy_string(name, length, d->name) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void *device, nvmlMemory_t *memory) {
    ENTER1("nvmlDeviceGetMemoryInfo", device);
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_memory) return NVML_ERROR_NOT_SUPPORTED;
    memory->total = d->memory;
    memory->used = d->memory / 100;
    memory->free = d->memory - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(void *device, unsigned int *minor) {
    ENTER1("nvmlDeviceGetMinorNumber", device);
    if (minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_minor) return NVML_ERROR_NOT_SUPPORTED;
    *minor = d->minor;
    return NVML_SUCCESS;
}

static nvmlReturn_t pci_info(const char *func, void *device, nvmlPciInfo_t *pci) {
    ENTER1(func, device);
    if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_pci) return NVML_ERROR_NOT_SUPPORTED;
    *pci = d->pci;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *device, nvmlPciInfo_t *pci) {
    return pci_info("nvmlDeviceGetPciInfo_v3", device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(void *device, nvmlPciInfo_t *pci) {
    return pci_info("nvmlDeviceGetPciInfo_v2", device, pci);
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(void *device, unsigned int *node) {
    ENTER1("nvmlDeviceGetNumaNodeId", device);
    if (node == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_numa) return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned int)d->numa;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_words(const unsigned long *src, int nsrc, unsigned int size, unsigned long *dst) {
    if (dst == NULL || size == 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < size; i++) dst[i] = (int)i < nsrc ? src[i] : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(void *device, unsigned int cpuSetSize, unsigned long *cpuSet) {
    ENTER1("nvmlDeviceGetCpuAffinity", device);
    if (!d->has_cpus) return NVML_ERROR_NOT_SUPPORTED;
    return copy_words(d->cpus, CPU_WORDS, cpuSetSize, cpuSet);
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(void *device, unsigned int nodeSetSize, unsigned long *nodeSet,
                                         unsigned int scope) {
    device_t *d = NULL;
    nvmlReturn_t rc = enter("nvmlDeviceGetMemoryAffinity", NULL, device, NULL, 0, -1, (int)scope, &d, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_nodes) return NVML_ERROR_NOT_SUPPORTED;
    return copy_words(d->nodes, NODE_WORDS, nodeSetSize, nodeSet);
}

static nvmlReturn_t pcie_value(const char *func, void *device, int which, unsigned int *out) {
    ENTER1(func, device);
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_pcie) return NVML_ERROR_NOT_SUPPORTED;
    *out = d->pcie[which];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(void *device, unsigned int *gen) {
    return pcie_value("nvmlDeviceGetCurrPcieLinkGeneration", device, 0, gen);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(void *device, unsigned int *width) {
    return pcie_value("nvmlDeviceGetCurrPcieLinkWidth", device, 1, width);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(void *device, unsigned int *gen) {
    return pcie_value("nvmlDeviceGetMaxPcieLinkGeneration", device, 2, gen);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(void *device, unsigned int *width) {
    return pcie_value("nvmlDeviceGetMaxPcieLinkWidth", device, 3, width);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *device, int *major, int *minor) {
    ENTER1("nvmlDeviceGetCudaComputeCapability", device);
    if (major == NULL || minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_cc) return NVML_ERROR_NOT_SUPPORTED;
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(void *device, unsigned int *arch) {
    ENTER1("nvmlDeviceGetArchitecture", device);
    if (arch == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_arch) return NVML_ERROR_NOT_SUPPORTED;
    *arch = d->arch;
    return NVML_SUCCESS;
}

/* ---- MIG ---- */

nvmlReturn_t nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending) {
    ENTER1("nvmlDeviceGetMigMode", device);
    if (current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_mig || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *current = d->mig_current;
    *pending = d->mig_pending;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count) {
    ENTER1("nvmlDeviceGetMaxMigDeviceCount", device);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_mig || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *count = d->mig_max;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void *device, unsigned int index, void **mig) {
    device_t *d = NULL;
    nvmlReturn_t rc = enter("nvmlDeviceGetMigDeviceHandleByIndex", NULL, device, NULL, 0, -1, (int)index, &d, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (mig == NULL || d->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_mig || d->mig_current == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= d->mig_max) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig[index] == NULL) return NVML_ERROR_NOT_FOUND;
    *mig = d->mig[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(void *device, unsigned int *isMig) {
    ENTER1("nvmlDeviceIsMigDeviceHandle", device);
    if (isMig == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *isMig = (unsigned int)d->is_mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(void *device, unsigned int *id) {
    ENTER1("nvmlDeviceGetGpuInstanceId", device);
    if (id == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = d->gi;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(void *device, unsigned int *id) {
    ENTER1("nvmlDeviceGetComputeInstanceId", device);
    if (id == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = d->ci;
    return NVML_SUCCESS;
}

/* ---- fabric ---- */

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(void *device, void *info) {
    unsigned int version = 0;
    if (info != NULL) memcpy(&version, info, sizeof version);
    device_t *d = NULL; /* the struct version (v2, v3) makes calls distinct */
    nvmlReturn_t rc = enter("nvmlDeviceGetGpuFabricInfoV", NULL, device, NULL, 0, -1, (int)(version >> 24), &d, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (version != 0x02000024u && version != 0x03000028u) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (d->fabric_max_version && (version >> 24) > d->fabric_max_version) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d->has_fabric || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    unsigned char buf[sizeof(fabric_v3_t)];
    fabric_v3_t full = d->fabric;
    full.version = version;
    memcpy(buf, &full, sizeof full);
    memcpy(info, buf, version & 0xFFFFFFu);
    return NVML_SUCCESS;
}

/* Version 2 only (0x0200002c): the chassis serial where v1 had a rack GUID. */
nvmlReturn_t nvmlDeviceGetPlatformInfo(void *device, void *info) {
    ENTER1("nvmlDeviceGetPlatformInfo", device);
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int version = 0;
    memcpy(&version, info, sizeof version);
    if (version != 0x0200002cu) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d->has_platform || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    platform_v2_t full = d->platform;
    full.version = version;
    memcpy(info, &full, sizeof full);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(void *device, fabric_v1_t *info) {
    ENTER1("nvmlDeviceGetGpuFabricInfo", device);
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_fabric || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    memcpy(info->clusterUuid, d->fabric.clusterUuid, sizeof info->clusterUuid);
    info->status = d->fabric.status;
    info->cliqueId = d->fabric.cliqueId;
    info->state = d->fabric.state;
    return NVML_SUCCESS;
}

/* ---- NVLink ---- */

static nvmlReturn_t link_of(const char *func, void *device, unsigned int link, link_t **out) {
    ENTER_LINK(func, device, link);
    if (d->is_mig || !d->has_links || d->nlinks == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned int)d->nlinks) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->links[link].present) return NVML_ERROR_NOT_SUPPORTED;
    *out = &d->links[link];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(void *device, unsigned int link, unsigned int *isActive) {
    link_t *k = NULL;
    nvmlReturn_t rc = link_of("nvmlDeviceGetNvLinkState", device, link, &k);
    if (rc != NVML_SUCCESS) return rc;
    if (isActive == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = (unsigned int)k->state;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(void *device, unsigned int link, unsigned int *version) {
    link_t *k = NULL;
    nvmlReturn_t rc = link_of("nvmlDeviceGetNvLinkVersion", device, link, &k);
    if (rc != NVML_SUCCESS) return rc;
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *version = k->version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(void *device, unsigned int link, unsigned int *type) {
    link_t *k = NULL;
    nvmlReturn_t rc = link_of("nvmlDeviceGetNvLinkRemoteDeviceType", device, link, &k);
    if (rc != NVML_SUCCESS) return rc;
    if (type == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *type = k->remote_type;
    return NVML_SUCCESS;
}

static nvmlReturn_t remote_pci(const char *func, void *device, unsigned int link, nvmlPciInfo_t *pci) {
    link_t *k = NULL;
    nvmlReturn_t rc = link_of(func, device, link, &k);
    if (rc != NVML_SUCCESS) return rc;
    if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!k->state) return NVML_ERROR_NOT_SUPPORTED;
    *pci = k->remote;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(void *device, unsigned int link, nvmlPciInfo_t *pci) {
    return remote_pci("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, link, pci);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(void *device, unsigned int link, nvmlPciInfo_t *pci) {
    return remote_pci("nvmlDeviceGetNvLinkRemotePciInfo", device, link, pci);
}

nvmlReturn_t nvmlDeviceGetFieldValues(void *device, int count, nvmlFieldValue_t *values) {
    device_t *d = NULL;
    char ids[64] = "";
    for (int i = 0; values != NULL && i < count && i < 8; i++) {
        size_t used = strlen(ids);
        snprintf(ids + used, sizeof ids - used, i ? "+%u" : "%u", values[i].fieldId);
    }
    char tag[72];
    snprintf(tag, sizeof tag, "[%s]", ids);
    nvmlReturn_t rc = enter("nvmlDeviceGetFieldValues", tag, device, NULL, 0, -1, -1, &d, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (values == NULL || count <= 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        v->valueType = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
        v->timestamp = 1700000000000000LL;
        v->latencyUsec = 0;
        v->value.ullVal = 0;
        for (int j = 0; j < d->nfields; j++) {
            if (d->field_id[j] == v->fieldId) {
                v->nvmlReturn = d->field_ret[j];
                v->value.uiVal = d->field_value[j];
            }
        }
    }
    return NVML_SUCCESS;
}

/* ---- pairs ---- */

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(void *device1, void *device2, int *level) {
    device_t *a = NULL, *b = NULL;
    nvmlReturn_t rc = enter("nvmlDeviceGetTopologyCommonAncestor", NULL, device1, device2, 1, -1, -1, &a, &b);
    if (rc != NVML_SUCCESS) return rc;
    if (level == NULL || a->is_mig || b->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *level = a == b ? 0 : g_ancestor[a->index][b->index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(void *device1, void *device2, int index, int *status) {
    device_t *a = NULL, *b = NULL;
    nvmlReturn_t rc = enter("nvmlDeviceGetP2PStatus", NULL, device1, device2, 1, -1, index, &a, &b);
    if (rc != NVML_SUCCESS) return rc;
    if (status == NULL || index < 0 || index >= MAX_P2P_INDEX || a->is_mig || b->is_mig || a == b)
        return NVML_ERROR_INVALID_ARGUMENT;
    signed char value = g_p2p[a->index][b->index][index];
    *status = value < 0 ? 5 /* NVML_P2P_STATUS_NOT_SUPPORTED */ : value;
    return NVML_SUCCESS;
}

/* ---- busy ---- */

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, nvmlProcessInfo_t *infos) {
    ENTER1("nvmlDeviceGetComputeRunningProcesses_v3", device);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < d->procs || (d->procs && infos == NULL)) {
        *count = d->procs;
        return d->procs ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned int i = 0; i < d->procs; i++) {
        infos[i].pid = 4000000u + (unsigned int)d->index * 100u + i; /* never the caller's own pid */
        infos[i].usedGpuMemory = 1ull << 30;
        infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = d->procs;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(void *device, nvmlUtilization_t *utilization) {
    ENTER1("nvmlDeviceGetUtilizationRates", device);
    if (utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = d->util_gpu;
    utilization->memory = d->util_memory;
    return NVML_SUCCESS;
}
