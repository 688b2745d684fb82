package fakeband

import "net/http"

// sockets will hold the agents' Phoenix connections.
type sockets struct{}

func (s *sockets) init()                       {}
func (s *sockets) all() []interface{ abort() } { return nil }

func (b *Band) pushLocked(agentID, topic, event string, payload any) {}
func (b *Band) pushRoomLocked(agentID, event string, r *room)        {}
func (b *Band) controlRoutes() []route                               { return nil }
func (b *Band) socketRoute(mux *http.ServeMux)                       {}

type socketRule struct{}
