package phoenix

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDecodePlainAgreesWithJSON: a frame the plain reader takes is one
// encoding/json reads alike.
func FuzzDecodePlainAgreesWithJSON(f *testing.F) {
	for _, seed := range []string{
		`["1","1","agent_control:a","phx_join",{}]`,
		`[null,"2","phoenix","heartbeat",{}]`,
		` [ "1" , 22 , "chat_room:r" , "phx_reply" , {"status":"ok","response":{}} ] `,
		`[1,2,"t","e",[1,2,3]]`, `[01,2,"t","e",1]`, `[0,2,"t","e",1]`,
		`[null,null,"t","e","<&>\u2028"]`, `[null,null,"t","e",1,2]`, `[null,null,"t","e",]`,
		`[null,null,"t","e",{}]]`, `[null,null,"t","e",[1]`, "[null,null,\"t\",\"e\",{}\u00a0]",
		`["a\"b",null,"t","e",{}]`, `[null,null,"","e",{}]`, `[nul,null,"t","e",{}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := decodePlain(data)
		if ok {
			slow, err := decodeJSON(data)
			require.NoError(t, err, "the plain reader took %q", data)
			assert.Equal(t, slow, fast)
		}
	})
}

// The frames Band and phoenix.js send are read without reflection.
func TestTheFramesPeersSendAreReadPlain(t *testing.T) {
	for _, frame := range []string{
		`["3","3","agent_control:a1","phx_join",{}]`,
		`[null,"7","phoenix","heartbeat",{}]`,
		`["3","4","chat_room:r1","phx_reply",{"status":"ok","response":{}}]`,
		`[null,null,"chat_room:r1","message_created",{"id":"m1","content":"<b>hi</b>\n","metadata":{"mentions":[]}}]`,
		`[1,12,"agent_rooms:a1","room_added",{"id":"r2"}]`,
	} {
		_, ok := decodePlain([]byte(frame))
		assert.True(t, ok, frame)
	}
}

// A payload at encoding/json's nesting limit is valid alone but not in
// its frame, one level down: the plain reader declines it, so Decode
// refuses it as decodeJSON does. One level less is read.
func TestAPayloadNestedToTheLimitIsRefusedAsByJSON(t *testing.T) {
	frame := func(depth int) []byte {
		return []byte(`[null,null,"agent_control:a1","agent.control",` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `]`)
	}
	_, err := decodeJSON(frame(maxNesting))
	require.Error(t, err, "the premise: encoding/json refuses the frame")
	_, ok := decodePlain(frame(maxNesting))
	assert.False(t, ok)
	_, err = Decode(frame(maxNesting))
	assert.Error(t, err)

	_, err = Decode(frame(maxNesting - 1))
	assert.NoError(t, err)
}

// BenchmarkDecodeAPush: a message_created push as Band sends it, read
// plain and by the encoding/json reader, for docs/performance.md.
func BenchmarkDecodeAPush(b *testing.B) {
	frame := []byte(`[null,null,"chat_room:0b2e9c1a-5f3d-4a7b-8c2e-000000000011","message_created",{"id":"0b2e9c1a-5f3d-4a7b-8c2e-000000000042","content":"@[[0b2e9c1a-5f3d-4a7b-8c2e-000000000007]] what is the status of order 9?","sender_id":"0b2e9c1a-5f3d-4a7b-8c2e-000000000003","sender_type":"User","metadata":{"mentions":[{"id":"0b2e9c1a-5f3d-4a7b-8c2e-000000000007","handle":"ops/bot"}]}}]`)
	for _, r := range []struct {
		name string
		read func([]byte) (Frame, error)
	}{{"plain", Decode}, {"encoding/json", decodeJSON}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.read(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
