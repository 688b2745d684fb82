package boltledger

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lock holder is this test binary run again: TestMain sees holdLockEnv
// and holds the ledger instead of running tests (-test.run=^$ says so too).
func TestOpenFailsWhileAnotherProcessHoldsTheLock(t *testing.T) {
	l, path := openNew(t)
	require.NoError(t, l.Close())

	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holdLockEnv+"="+path)
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	release, err := holder.StdinPipe()
	require.NoError(t, err)
	said, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() {
		_ = release.Close()
		_ = holder.Wait()
	})

	line, readErr := bufio.NewReader(said).ReadString('\n')
	if line != "locked\n" {
		_ = release.Close()
		waitErr := holder.Wait() // the holder's stderr is complete after this
		t.Fatalf("holder did not take the lock: said %q (%v), exited %v, stderr %q", line, readErr, waitErr, holderErr.String())
	}

	_, err = Open(path, Options{AgentID: testAgent})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), "ledger "+path+" is in use by another process")
	assert.Contains(t, err.Error(), `for agent "`+testAgent+`"`)

	require.NoError(t, release.Close())
	waitErr := holder.Wait()
	require.NoError(t, waitErr, "holder stderr: %s", holderErr.String())
	after, err := Open(path, Options{AgentID: testAgent})
	require.NoError(t, err, "the lock goes with the holder")
	require.NoError(t, after.Close())
}
