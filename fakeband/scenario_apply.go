package fakeband

import (
	"fmt"
	"strings"
)

// Cast is what applying a Scenario created, in the scenario's order.
type Cast struct {
	Owner  Human // the operator: owns every agent, may interrupt them
	Humans []Human
	Agents []Agent
	Rooms  []CastRoom
	Script []string // ids of the scripted messages, in order
}

// CastRoom is a room of the cast with its owner and its members.
type CastRoom struct {
	Room
	OwnerID   string
	MemberIDs []string // every member, the owner first
}

// Apply validates the scenario and creates it on b: its humans, agents
// and rooms, then its script and its faults. It adds to whatever b has
// already (a handle already taken gets a numeric suffix). Ids and keys
// come from b's seed: apply to New(Options{Seed: s.Seed}) for the
// scenario's reproducible keys.
func (s *Scenario) Apply(b *Band) (*Cast, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cast := &Cast{Owner: b.Owner()}
	ids := map[string]string{strings.ToLower(OperatorName): cast.Owner.ID}
	humans := map[string]Human{strings.ToLower(OperatorName): cast.Owner}
	for _, h := range s.Humans {
		hu := b.AddHuman(h.Name)
		cast.Humans = append(cast.Humans, hu)
		ids[strings.ToLower(h.Name)], humans[strings.ToLower(h.Name)] = hu.ID, hu
	}
	for _, a := range s.Agents {
		ag := b.AddAgent(a.Name)
		if a.Description != "" {
			_ = b.SetDescription(ag.ID, a.Description) // ag was just added as an agent
		}
		cast.Agents = append(cast.Agents, ag)
		ids[strings.ToLower(a.Name)] = ag.ID
	}
	roomIDs := map[string]string{}
	for i := range s.Rooms {
		r := &s.Rooms[i]
		owner := humans[strings.ToLower(ownerOf(r))]
		var members []string
		for _, m := range r.Members {
			members = append(members, ids[strings.ToLower(m)])
		}
		room := b.AddRoom(r.Title, owner, members...)
		roomIDs[r.Title] = room.ID
		cr := CastRoom{Room: room, OwnerID: owner.ID, MemberIDs: []string{owner.ID}}
		for _, id := range members {
			if id != owner.ID {
				cr.MemberIDs = append(cr.MemberIDs, id)
			}
		}
		cast.Rooms = append(cast.Rooms, cr)
	}
	check := &scenarioCheck{s: s, kinds: map[string]string{}}
	check.participants()
	for i, line := range s.Script {
		r := s.roomTitled(line.Room)
		from := line.From
		if from == "" {
			from = ownerOf(r)
		}
		mentions := line.Mentions
		if len(mentions) == 0 {
			mentions = check.agentsIn(r, from)
		}
		var mentionIDs []string
		for _, m := range mentions {
			mentionIDs = append(mentionIDs, ids[strings.ToLower(m)])
		}
		id, err := b.Say(roomIDs[line.Room], ids[strings.ToLower(from)], line.Text, mentionIDs...)
		if err != nil {
			return nil, &ScenarioError{Path: fmt.Sprintf("script[%d]", i), Problem: "the Band refused it: " + err.Error(), Err: err}
		}
		cast.Script = append(cast.Script, id)
	}
	if err := b.InjectPlan(s.Faults); err != nil {
		return nil, &ScenarioError{Path: "faults", Problem: err.Error(), Err: err}
	}
	return cast, nil
}

func (s *Scenario) roomTitled(title string) *ScenarioRoom {
	for i := range s.Rooms {
		if s.Rooms[i].Title == title {
			return &s.Rooms[i]
		}
	}
	return nil
}
