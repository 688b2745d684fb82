package fakeband

func (b *Band) humanRoutes() []route {
	return append([]route{
		{"POST /api/v1/me/chats/{chat_id}/messages", EndpointHumanPost, humanSide, b.postOverHTTP},
	}, b.controlRoutes()...)
}
