package core

import "fmt"

// StoreReport is what CheckStore found: the records of each kind, and each
// record core cannot read.
type StoreReport struct {
	Sessions, Messages, Retained, Inbound, Wills int
	// Orphans are messages owed to a session the store does not hold;
	// a start deletes them.
	Orphans  int
	Problems []error
}

// maxProblems bounds the problems a report lists.
const maxProblems = 100

func (r *StoreReport) problem(err error) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, err)
	}
}

// CheckStore reads every record of st and decodes it as a start would,
// without changing anything: `xmq store check` uses it on a store opened
// read-only. A record that cannot be decoded is listed in Problems; the
// error is for a store that cannot be read at all.
func CheckStore(st Store) (rep StoreReport, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("core: checking store: %v", v)
		}
	}()
	err = st.LoadInbound(func(id string, rec []byte) error {
		rep.Inbound++
		var r inboundRecord
		if err := r.decode(rec); err != nil {
			rep.problem(fmt.Errorf("inbound state of session %q: %w", id, err))
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	sessions := map[string]bool{}
	err = st.Load(func(id string, rec []byte) error {
		rep.Sessions++
		sessions[id] = true
		var r sessionRecord
		if err := r.decode(rec); err != nil {
			rep.problem(fmt.Errorf("session %q: %w", id, err))
		}
		return nil
	}, func(id string, seq uint64, rec []byte) error {
		rep.Messages++
		if !sessions[id] {
			rep.Orphans++
		}
		if _, err := decodeDeliveryRecord(rec); err != nil {
			rep.problem(fmt.Errorf("message %d of session %q: %w", seq, id, err))
		}
		return nil
	}, func(topic string, rec []byte) error {
		rep.Retained++
		if _, err := decodeDeliveryRecord(rec); err != nil {
			rep.problem(fmt.Errorf("retained message %q: %w", topic, err))
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	err = st.LoadWills(func(id string, rec []byte) error {
		rep.Wills++
		var r willRecord
		if err := r.decode(rec); err != nil {
			rep.problem(fmt.Errorf("will of %q: %w", id, err))
		}
		return nil
	})
	return rep, err
}
