package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/xmq-io/xmq/core"
)

func TestStoreHealthy(t *testing.T) {
	st := newFaultStore()
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.StoreHealthy(); err != nil {
		t.Errorf("a running broker: %v", err)
	}
	before := srv.Stats().StoreSyncs
	st.syncFail.Store(true)
	if err := srv.StoreHealthy(); err == nil {
		t.Error("a store whose Sync fails is healthy")
	}
	st.syncFail.Store(false)
	if err := srv.StoreHealthy(); err != nil {
		t.Errorf("after the store recovered: %v", err)
	}
	if after := srv.Stats().StoreSyncs; after != before {
		t.Errorf("the probe's syncs went into the latency histogram: %v → %v", before, after)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.StoreHealthy(); !errors.Is(err, core.ErrServerClosed) {
		t.Errorf("after Shutdown: %v, want ErrServerClosed", err)
	}
}
