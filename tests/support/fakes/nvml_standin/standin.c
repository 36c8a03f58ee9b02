/*
 * A stand-in for libnvidia-ml.so.1 for linkscope's tests: the NVML C ABI (struct layouts and symbol
 * names as in nvml.h), answering from a flat machine description instead of a GPU.
 *
 * The description is a text file named by $LINKSCOPE_NVML_DESCRIPTION, one answer per line:
 *     <symbol>.<args...> =<value>     the call succeeds with <value>
 *     <symbol>.<args...> !<code>      the call returns nvmlReturn_t <code>
 * A device argument is written as its NVML index ("3") or, for a MIG device, "3m1". A call whose
 * key is absent answers NVML_ERROR_NOT_SUPPORTED. Faults: "fault.<symbol>.<gpu|*> <code>",
 * "hang.<symbol>.<gpu|*> <seconds>", "lost.<gpu> 1", "init.error <code>", "init.slow_s <s>",
 * "first_touch_s <s>"; "fabric.padding 1" leaves non-zero bytes after the one-byte fabric state.
 * The file is read again whenever it changes (the tests rewrite it to move live counters on).
 * Built without LINKSCOPE_OLD_DRIVER it exports every function linkscope calls; with it, the
 * functions an older driver lacks are left out, so pynvml answers FunctionNotFound.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t;
enum {
    SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, DRIVER_NOT_LOADED = 9,
    INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15, ARGUMENT_VERSION_MISMATCH = 25
};

struct nvmlDevice_st { int index; int mig; };
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

typedef union {
    double dVal; unsigned int uiVal; unsigned long ulVal; unsigned long long ullVal;
    signed long long sllVal; signed int siVal; unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state; /* nvmlGpuFabricState_t is one byte; pynvml reads four */
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
#define FABRIC_INFO_V2 ((unsigned int)(sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24)))

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define MAX_GPUS 64
#define MAX_MIG 7

/* --- the description: a hash table of key -> answer ------------------------------------- */
typedef struct { char *key; char *value; } entry_t;
static entry_t *table;
static size_t table_size;
static char *text;
static struct stat loaded;
static char loaded_path[4096];
static int initialized;
static int touched[MAX_GPUS];
static struct nvmlDevice_st devices[MAX_GPUS];
static struct nvmlDevice_st mig_devices[MAX_GPUS][MAX_MIG];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t hash(const char *s) {
    size_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static void release_table(void) {
    free(table); free(text);
    table = NULL; text = NULL; table_size = 0;
}

/* Read the description file into the table; 0 on success. Caller holds the lock. */
static int load(const char *path, const struct stat *info) {
    FILE *file = fopen(path, "rb");
    if (!file) return -1;
    char *buffer = malloc((size_t)info->st_size + 1);
    size_t got = fread(buffer, 1, (size_t)info->st_size, file);
    fclose(file);
    buffer[got] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < got; i++) lines += buffer[i] == '\n';
    release_table();
    text = buffer;
    table_size = lines * 2 + 16;
    table = calloc(table_size, sizeof(entry_t));
    for (char *line = strtok(buffer, "\n"); line; line = strtok(NULL, "\n")) {
        char *space = strchr(line, ' ');
        if (!space) continue;
        *space = 0;
        size_t slot = hash(line) % table_size;
        while (table[slot].key && strcmp(table[slot].key, line) != 0) slot = (slot + 1) % table_size;
        table[slot].key = line;
        table[slot].value = space + 1;
    }
    loaded = *info;
    return 0;
}

/* Re-read the description when the file changed (another inode, size or modification time). */
static void refresh(void) {
    const char *path = getenv("LINKSCOPE_NVML_DESCRIPTION");
    struct stat info;
    if (!path || stat(path, &info) != 0) return;
    if (strcmp(path, loaded_path) != 0) { /* another machine: a fresh driver state */
        snprintf(loaded_path, sizeof loaded_path, "%s", path);
        memset(touched, 0, sizeof touched);
        initialized = 0;
        release_table();
    }
    if (table && info.st_ino == loaded.st_ino && info.st_size == loaded.st_size &&
        info.st_mtim.tv_sec == loaded.st_mtim.tv_sec && info.st_mtim.tv_nsec == loaded.st_mtim.tv_nsec)
        return;
    load(path, &info);
}

/* The answer for a key (a copy into `out`), or 0 when the key is absent. */
static int lookup(const char *key, char *out, size_t size) {
    int found = 0;
    pthread_mutex_lock(&lock);
    refresh();
    if (table) {
        size_t slot = hash(key) % table_size;
        while (table[slot].key) {
            if (strcmp(table[slot].key, key) == 0) {
                snprintf(out, size, "%s", table[slot].value);
                found = 1;
                break;
            }
            slot = (slot + 1) % table_size;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static double number_of(const char *key, double fallback) {
    char value[64];
    return lookup(key, value, sizeof value) ? atof(value) : fallback;
}

static void pause_s(double seconds) {
    if (seconds <= 0) return;
    struct timespec wait = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&wait, NULL);
}

static void name_of(nvmlDevice_t device, char *out, size_t size) {
    if (device->mig >= 0) snprintf(out, size, "%dm%d", device->index, device->mig);
    else snprintf(out, size, "%d", device->index);
}

/* What every call does first, in the order the Python fake does it: block, check init, lost, faults. */
static nvmlReturn_t enter(const char *symbol, nvmlDevice_t a, nvmlDevice_t b) {
    char key[160];
    int indices[2] = {a ? a->index : -1, b ? b->index : -1};
    snprintf(key, sizeof key, "hang.%s.*", symbol);
    pause_s(number_of(key, 0));
    for (int i = 0; i < 2; i++) {
        if (indices[i] < 0) continue;
        snprintf(key, sizeof key, "hang.%s.%d", symbol, indices[i]);
        pause_s(number_of(key, 0));
    }
    if (!initialized) return UNINITIALIZED;
    for (int i = 0; i < 2; i++) {
        if (indices[i] < 0) continue;
        snprintf(key, sizeof key, "lost.%d", indices[i]);
        if (number_of(key, 0)) return GPU_IS_LOST;
    }
    snprintf(key, sizeof key, "fault.%s.*", symbol);
    int code = (int)number_of(key, 0);
    for (int i = 0; i < 2 && !code; i++) {
        if (indices[i] < 0) continue;
        snprintf(key, sizeof key, "fault.%s.%d", symbol, indices[i]);
        code = (int)number_of(key, 0);
    }
    return code;
}

/* The answer to `key`: SUCCESS with the text after '=' in `value`, or the error code. */
static nvmlReturn_t answer(const char *key, char *value, size_t size) {
    char raw[512];
    if (!lookup(key, raw, sizeof raw)) return NOT_SUPPORTED;
    if (raw[0] == '!') return atoi(raw + 1);
    snprintf(value, size, "%s", raw + 1);
    return SUCCESS;
}

/* A getter of one device: enter, then the answer for "<symbol>.<device><suffix>". */
static nvmlReturn_t device_answer(const char *symbol, nvmlDevice_t device, const char *suffix, char *value, size_t size) {
    nvmlReturn_t code = enter(symbol, device, NULL);
    if (code) return code;
    char name[32], key[160];
    name_of(device, name, sizeof name);
    snprintf(key, sizeof key, "%s.%s%s", symbol, name, suffix);
    return answer(key, value, size);
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (!out || strlen(value) + 1 > length) return INSUFFICIENT_SIZE;
    strcpy(out, value);
    return SUCCESS;
}

#define UINT_GETTER(symbol)                                                  \
    nvmlReturn_t symbol(nvmlDevice_t device, unsigned int *result) {         \
        char value[64];                                                      \
        nvmlReturn_t code = device_answer(#symbol, device, "", value, sizeof value); \
        if (code == SUCCESS) *result = (unsigned int)strtoul(value, NULL, 10); \
        return code;                                                         \
    }

/* --- system ------------------------------------------------------------------------------ */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    char value[64];
    pthread_mutex_lock(&lock);
    refresh();
    int described = table != NULL;
    pthread_mutex_unlock(&lock);
    if (!described) return DRIVER_NOT_LOADED;
    pause_s(number_of("hang.nvmlInitWithFlags.*", 0));
    pause_s(number_of("init.slow_s", 0));
    if (lookup("init.error", value, sizeof value)) return atoi(value);
    if (number_of("fault.nvmlInitWithFlags.*", 0)) return (int)number_of("fault.nvmlInitWithFlags.*", 0);
    for (int i = 0; i < MAX_GPUS; i++) {
        devices[i].index = i; devices[i].mig = -1;
        for (int m = 0; m < MAX_MIG; m++) { mig_devices[i][m].index = i; mig_devices[i][m].mig = m; }
    }
    initialized++;
    return SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    nvmlReturn_t code = enter("nvmlShutdown", NULL, NULL);
    if (code) return code;
    initialized--;
    return SUCCESS;
}

static nvmlReturn_t system_string(const char *symbol, char *out, unsigned int length) {
    char value[128];
    nvmlReturn_t code = enter(symbol, NULL, NULL);
    if (code) return code;
    code = answer(symbol, value, sizeof value);
    return code ? code : copy_string(value, out, length);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned int length) {
    return system_string("nvmlSystemGetDriverVersion", out, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *out, unsigned int length) {
    return system_string("nvmlSystemGetNVMLVersion", out, length);
}

static nvmlReturn_t system_int(const char *symbol, int *result) {
    char value[64];
    nvmlReturn_t code = enter(symbol, NULL, NULL);
    if (code) return code;
    code = answer(symbol, value, sizeof value);
    if (code == SUCCESS) *result = atoi(value);
    return code;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    return system_int("nvmlSystemGetCudaDriverVersion", version);
}

#ifndef LINKSCOPE_OLD_DRIVER
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return system_int("nvmlSystemGetCudaDriverVersion_v2", version);
}
#endif

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    return system_int("nvmlDeviceGetCount_v2", (int *)count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (index >= MAX_GPUS) return INVALID_ARGUMENT;
    nvmlReturn_t code = enter("nvmlDeviceGetHandleByIndex_v2", &devices[index], NULL);
    if (code) return code;
    if ((int)index >= (int)number_of("count", 0)) return INVALID_ARGUMENT;
    if (!touched[index]) {
        touched[index] = 1;
        pause_s(number_of("first_touch_s", 0));
    }
    *device = &devices[index];
    return SUCCESS;
}

/* --- one GPU ------------------------------------------------------------------------------ */
static nvmlReturn_t device_string(const char *symbol, nvmlDevice_t device, char *out, unsigned int length) {
    char value[256];
    nvmlReturn_t code = device_answer(symbol, device, "", value, sizeof value);
    return code ? code : copy_string(value, out, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *out, unsigned int length) {
    return device_string("nvmlDeviceGetName", device, out, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *out, unsigned int length) {
    return device_string("nvmlDeviceGetUUID", device, out, length);
}

static void fill_pci(const char *bus_id, nvmlPciInfo_t *pci) {
    memset(pci, 0, sizeof *pci);
    unsigned int domain = 0, bus = 0, slot = 0, function = 0;
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function);
    pci->domain = domain; pci->bus = bus; pci->device = slot;
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xFFFF, bus, slot, function);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    char value[64];
    nvmlReturn_t code = device_answer("nvmlDeviceGetPciInfo_v3", device, "", value, sizeof value);
    if (code == SUCCESS) fill_pci(value, pci);
    return code;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    char value[128];
    nvmlReturn_t code = device_answer("nvmlDeviceGetMemoryInfo", device, "", value, sizeof value);
    if (code == SUCCESS) sscanf(value, "%llu:%llu:%llu", &memory->total, &memory->free, &memory->used);
    return code;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    char value[64];
    nvmlReturn_t code = device_answer("nvmlDeviceGetCudaComputeCapability", device, "", value, sizeof value);
    if (code == SUCCESS) sscanf(value, "%d:%d", major, minor);
    return code;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    char value[64];
    nvmlReturn_t code = device_answer("nvmlDeviceGetMigMode", device, "", value, sizeof value);
    if (code == SUCCESS) sscanf(value, "%u:%u", current, pending);
    return code;
}

/* Words "w0:w1:..." (decimal) into an array of `size` 64-bit words; words past the array are dropped. */
static void fill_words(const char *value, unsigned int size, unsigned long *words) {
    memset(words, 0, size * sizeof *words);
    const char *cursor = value;
    for (unsigned int i = 0; i < size && *cursor; i++) {
        char *end;
        words[i] = strtoul(cursor, &end, 10);
        cursor = *end == ':' ? end + 1 : end;
    }
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size, unsigned long *cpus) {
    char value[2048];
    nvmlReturn_t code = device_answer("nvmlDeviceGetCpuAffinity", device, "", value, sizeof value);
    if (code == SUCCESS) fill_words(value, size, cpus);
    return code;
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int size, unsigned long *nodes, unsigned int scope) {
    char value[512];
    (void)scope;
    nvmlReturn_t code = device_answer("nvmlDeviceGetMemoryAffinity", device, "", value, sizeof value);
    if (code == SUCCESS) fill_words(value, size, nodes);
    return code;
}

#ifndef LINKSCOPE_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node) {
    char value[64];
    nvmlReturn_t code = device_answer("nvmlDeviceGetNumaNodeId", device, "", value, sizeof value);
    if (code == SUCCESS) *node = (unsigned int)atoi(value);
    return code;
}
#endif

UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth)
UINT_GETTER(nvmlDeviceGetMaxMigDeviceCount)
UINT_GETTER(nvmlDeviceGetGpuInstanceId)
UINT_GETTER(nvmlDeviceGetComputeInstanceId)

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *result) {
    char value[64], suffix[16];
    snprintf(suffix, sizeof suffix, ".%d", counter);
    nvmlReturn_t code = device_answer("nvmlDeviceGetPcieThroughput", device, suffix, value, sizeof value);
    if (code == SUCCESS) *result = (unsigned int)strtoul(value, NULL, 10);
    return code;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    char value[64], suffix[16];
    snprintf(suffix, sizeof suffix, ".%d", type);
    nvmlReturn_t code = device_answer("nvmlDeviceGetClockInfo", device, suffix, value, sizeof value);
    if (code == SUCCESS) *clock = (unsigned int)strtoul(value, NULL, 10);
    return code;
}

#ifndef LINKSCOPE_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfo_v2_t *info) {
    char value[128];
    nvmlReturn_t code = enter("nvmlDeviceGetGpuFabricInfoV", device, NULL);
    if (code) return code;
    if (info->version != FABRIC_INFO_V2) return ARGUMENT_VERSION_MISMATCH;
    code = device_answer("nvmlDeviceGetGpuFabricInfoV", device, "", value, sizeof value);
    if (code) return code;
    unsigned int state = 0, status = 0, clique = 0;
    char uuid_hex[33] = {0};
    sscanf(value, "%u:%u:%u:%32[0-9a-f]", &state, &status, &clique, uuid_hex);
    info->state = (unsigned char)state;
    info->status = (nvmlReturn_t)status;
    info->cliqueId = clique;
    for (int i = 0; i < 16 && uuid_hex[2 * i] && uuid_hex[2 * i + 1]; i++) {
        unsigned int byte = 0;
        sscanf(uuid_hex + 2 * i, "%2x", &byte);
        info->clusterUuid[i] = (unsigned char)byte;
    }
    if (number_of("fabric.padding", 0)) memset((char *)info + offsetof(nvmlGpuFabricInfo_v2_t, state) + 1, 0xA5, 3);
    return SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos) {
    char value[64];
    nvmlReturn_t code = device_answer("nvmlDeviceGetComputeRunningProcesses_v3", device, "", value, sizeof value);
    if (code) return code;
    unsigned int running = (unsigned int)strtoul(value, NULL, 10);
    if (running == 0) { *count = 0; return SUCCESS; }
    if (!infos || *count < running) { *count = running; return INSUFFICIENT_SIZE; }
    for (unsigned int i = 0; i < running; i++) {
        memset(&infos[i], 0, sizeof infos[i]);
        infos[i].pid = 1000 + i;
    }
    *count = running;
    return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    char value[16], suffix[16];
    snprintf(suffix, sizeof suffix, ".%u", index);
    nvmlReturn_t code = device_answer("nvmlDeviceGetMigDeviceHandleByIndex", device, suffix, value, sizeof value);
    if (code == SUCCESS) *mig = &mig_devices[device->index][index % MAX_MIG];
    return code;
}

/* --- NVLink --------------------------------------------------------------------------------- */
static nvmlReturn_t link_answer(const char *symbol, nvmlDevice_t device, unsigned int link, char *value, size_t size) {
    char suffix[16];
    snprintf(suffix, sizeof suffix, ".%u", link);
    return device_answer(symbol, device, suffix, value, size);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int *active) {
    char value[16];
    nvmlReturn_t code = link_answer("nvmlDeviceGetNvLinkState", device, link, value, sizeof value);
    if (code == SUCCESS) *active = (unsigned int)atoi(value);
    return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version) {
    char value[16];
    nvmlReturn_t code = link_answer("nvmlDeviceGetNvLinkVersion", device, link, value, sizeof value);
    if (code == SUCCESS) *version = (unsigned int)atoi(value);
    return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    char value[64];
    nvmlReturn_t code = link_answer("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, link, value, sizeof value);
    if (code == SUCCESS) fill_pci(value, pci);
    return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link, int *type) {
    char value[16];
    nvmlReturn_t code = link_answer("nvmlDeviceGetNvLinkRemoteDeviceType", device, link, value, sizeof value);
    if (code == SUCCESS) *type = atoi(value);
    return code;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
    nvmlReturn_t code = enter("nvmlDeviceGetFieldValues", device, NULL);
    if (code) return code;
    char name[32], key[160], value[64];
    name_of(device, name, sizeof name);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *field = &values[i];
        snprintf(key, sizeof key, "nvmlDeviceGetFieldValues.%s.%u.%u", name, field->fieldId, field->scopeId);
        nvmlReturn_t result = answer(key, value, sizeof value);
        if (result == NOT_SUPPORTED) {
            snprintf(key, sizeof key, "nvmlDeviceGetFieldValues.%s.%u.*", name, field->fieldId);
            result = answer(key, value, sizeof value);
        }
        field->timestamp = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
        field->latencyUsec = 0;
        field->nvmlReturn = result;
        field->valueType = 3; /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG */
        field->value.ullVal = result == SUCCESS ? strtoull(value, NULL, 10) : 0;
    }
    return SUCCESS;
}

/* --- pairs ----------------------------------------------------------------------------------- */
static nvmlReturn_t pair_answer(const char *symbol, nvmlDevice_t a, nvmlDevice_t b, const char *suffix, int *result) {
    char key[160], value[16];
    nvmlReturn_t code = enter(symbol, a, b);
    if (code) return code;
    snprintf(key, sizeof key, "%s.%d.%d%s", symbol, a->index, b->index, suffix);
    code = answer(key, value, sizeof value);
    if (code == SUCCESS) *result = atoi(value);
    return code;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    return pair_answer("nvmlDeviceGetTopologyCommonAncestor", a, b, "", level);
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
    char suffix[16];
    snprintf(suffix, sizeof suffix, ".%d", index);
    return pair_answer("nvmlDeviceGetP2PStatus", a, b, suffix, status);
}
