//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
#include <rte_spinlock.h>
#include <rte_telemetry.h>

// The telemetry thread (C) answers from this snapshot; Go replaces it with
// one cgo call per publish. C never calls Go and never keeps Go memory.
#define MR_TEL_MAX 256
#define MR_TEL_NAME 64
static rte_spinlock_t mr_tel_lock = RTE_SPINLOCK_INITIALIZER;
static char mr_tel_names[MR_TEL_MAX][MR_TEL_NAME];
static uint64_t mr_tel_vals[MR_TEL_MAX];
static int mr_tel_n;

static int mr_tel_cb(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_spinlock_lock(&mr_tel_lock);
	for (int i = 0; i < mr_tel_n; i++)
		rte_tel_data_add_dict_u64(d, mr_tel_names[i], mr_tel_vals[i]);
	rte_spinlock_unlock(&mr_tel_lock);
	return 0;
}

static int mr_tel_register(const char *cmd, const char *help)
{
	return rte_telemetry_register_cmd(cmd, mr_tel_cb, help);
}

// names: n NUL-terminated names back to back.
static void mr_tel_publish(const char *names, const uint64_t *vals, int n)
{
	if (n > MR_TEL_MAX)
		n = MR_TEL_MAX;
	rte_spinlock_lock(&mr_tel_lock);
	for (int i = 0; i < n; i++) {
		snprintf(mr_tel_names[i], MR_TEL_NAME, "%s", names);
		names += strlen(names) + 1;
		mr_tel_vals[i] = vals[i];
	}
	mr_tel_n = n;
	rte_spinlock_unlock(&mr_tel_lock);
}
*/
import "C"

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// MaxTelemetryValues is the most values one telemetry command reports
// (DPDK's dictionary limit).
const MaxTelemetryValues = C.MR_TEL_MAX

var telOnce sync.Map

// RegisterTelemetry registers a telemetry command (e.g. "/metaroce/stats")
// that answers with the values last given to PublishTelemetry. One
// snapshot serves the process. Registering the same command twice is a
// no-op.
func RegisterTelemetry(cmd, help string) error {
	if !strings.HasPrefix(cmd, "/") {
		return fmt.Errorf("dpdk: telemetry command %q must start with /", cmd)
	}
	if _, dup := telOnce.LoadOrStore(cmd, true); dup {
		return nil
	}
	cc, ch := C.CString(cmd), C.CString(help)
	defer C.free(unsafe.Pointer(cc))
	defer C.free(unsafe.Pointer(ch))
	if ret := C.mr_tel_register(cc, ch); ret != 0 {
		telOnce.Delete(cmd)
		return &Error{Op: "rte_telemetry_register_cmd " + cmd, Errno: int(-ret)}
	}
	return nil
}

// PublishTelemetry replaces the snapshot the telemetry command reports:
// names[i] = values[i]. Names longer than 63 bytes are cut; beyond
// MaxTelemetryValues entries are dropped. Safe from any goroutine.
func PublishTelemetry(names []string, values []uint64) {
	n := min(len(names), len(values), MaxTelemetryValues)
	if n == 0 {
		C.mr_tel_publish(nil, nil, 0)
		return
	}
	var buf []byte
	for _, s := range names[:n] {
		buf = append(buf, s...)
		buf = append(buf, 0)
	}
	C.mr_tel_publish((*C.char)(unsafe.Pointer(&buf[0])), (*C.uint64_t)(unsafe.Pointer(&values[0])), C.int(n))
}

// TelemetrySocket is the path of the EAL's telemetry socket (v2 protocol),
// under the runtime directory of its --file-prefix.
func TelemetrySocket() string {
	return filepath.Join(C.GoString(C.rte_eal_get_runtime_dir()), "dpdk_telemetry.v2")
}
