package cmdlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecordsAreSlogTextAtInfoOrDebug(t *testing.T) {
	var b strings.Builder
	log := New(&b, false)
	log.Debug("hidden")
	log.Info("fakeband: stopped", "n", 1)
	assert.Regexp(t, `^time=\S+ level=INFO msg="fakeband: stopped" n=1\n$`, b.String())

	b.Reset()
	New(&b, true).Debug("shown")
	assert.Contains(t, b.String(), "level=DEBUG msg=shown")
}
