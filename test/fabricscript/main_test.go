package fabricscript

import (
	"os"
	"testing"

	"github.com/metaroce/metaroce/test/internal/binary"
)

func TestMain(m *testing.M) {
	code := m.Run()
	binary.Cleanup()
	os.Exit(code)
}
