package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetadataReadsAStringMember(t *testing.T) {
	var m Message
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"dedup_key":"k1","n":2,"mentions":[{"id":"a"}]}}`), &m))
	k, ok := m.Metadata.String("dedup_key")
	assert.True(t, ok)
	assert.Equal(t, "k1", k)
	_, ok = m.Metadata.String("n")
	assert.False(t, ok, "a number is not a string")
	_, ok = m.Metadata.String("absent")
	assert.False(t, ok)
}

func TestMetadataAbsentOrNullHasNoMembers(t *testing.T) {
	for _, body := range []string{`{}`, `{"metadata":null}`} {
		var m Message
		require.NoError(t, json.Unmarshal([]byte(body), &m))
		assert.True(t, m.Metadata.IsZero(), body)
		_, ok := m.Metadata.String("dedup_key")
		assert.False(t, ok, body)
	}
}

func TestMetadataThatIsNoObjectIsRefused(t *testing.T) {
	for _, body := range []string{`{"metadata":"no"}`, `{"metadata":[1]}`, `{"metadata":3}`} {
		var m Message
		assert.Error(t, json.Unmarshal([]byte(body), &m), body)
	}
}

func TestMetadataIsKeptApartFromTheBody(t *testing.T) {
	body := []byte(`{"metadata":{"dedup_key":"k1"}}`)
	var m Message
	require.NoError(t, json.Unmarshal(body, &m))
	copy(body, `{"metadata":{"dedup_key":"XX"}}`)
	k, _ := m.Metadata.String("dedup_key")
	assert.Equal(t, "k1", k)
	out, err := json.Marshal(m.Metadata)
	require.NoError(t, err)
	assert.JSONEq(t, `{"dedup_key":"k1"}`, string(out))
}

func TestMetadataMapIsTheWholeObject(t *testing.T) {
	var m Message
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"mentions":[{"id":"a1"}],"n":2}}`), &m))
	assert.Equal(t, map[string]any{"mentions": []any{map[string]any{"id": "a1"}}, "n": 2.0}, m.Metadata.Map())
	assert.Nil(t, Metadata{}.Map())
}
