package checkpoint

import (
	"testing"

	"go.uber.org/goleak"
)

// The file_storage extension is shut down by every test: nothing of it
// may outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
