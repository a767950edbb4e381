package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// usageSink is a store for the meter: it sums what it is given, or fails.
type usageSink struct {
	mu     sync.Mutex
	sum    map[string]*accounts.KeyUsage // by key id and hour
	writes int
	fail   error
}

func (s *usageSink) write(_ context.Context, rows []accounts.KeyUsage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.writes++
	if s.sum == nil {
		s.sum = map[string]*accounts.KeyUsage{}
	}
	for i := range rows {
		k := rows[i].KeyID + "@" + rows[i].Hour.Format(time.RFC3339)
		if s.sum[k] == nil {
			s.sum[k] = &accounts.KeyUsage{KeyID: rows[i].KeyID, Hour: rows[i].Hour}
		}
		s.sum[k].Add(&rows[i])
	}
	return nil
}

func (s *usageSink) get(key string, hour time.Time) accounts.KeyUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.sum[key+"@"+hour.UTC().Format(time.RFC3339)]; u != nil {
		return *u
	}
	return accounts.KeyUsage{}
}

var usageHour = time.Date(2033, 1, 31, 9, 0, 0, 0, time.UTC)

// Concurrent records, flushed while they run and at Close, add up to what
// was recorded, per key and hour.
func TestUsageMeterConcurrentSum(t *testing.T) {
	sink := &usageSink{}
	m := NewUsageMeter(sink.write, time.Hour, nil)
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", w%3)
			for i := range each {
				at := usageHour.Add(time.Duration(i%2) * time.Hour).Add(time.Duration(i) * time.Second)
				if i%5 == 0 {
					m.Refused(key, at, "lanes_full")
					continue
				}
				m.Admitted(key, at, 3, 2, 500*time.Millisecond)
			}
		}()
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for range 20 {
			if err := m.Flush(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	<-flushed
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Per worker and hour: each/2 requests, a fifth of them refused.
	workersOf := map[string]int64{"k0": 3, "k1": 3, "k2": 2}
	for key, n := range workersOf {
		for h := range 2 {
			u := sink.get(key, usageHour.Add(time.Duration(h)*time.Hour))
			admitted, refused := n*200, n*50
			if u.Admitted != admitted || u.Refused["lanes_full"] != refused || u.InputTokens != 3*admitted ||
				u.OutputTokens != 2*admitted || u.Seconds != 0.5*float64(admitted) {
				t.Errorf("%s hour %d: %+v, want %d admitted, %d refused", key, h, u, admitted, refused)
			}
		}
	}
}

// A flush the store refuses keeps its counts: the next one writes them with
// what came since.
func TestUsageMeterKeepsCountsOnFailure(t *testing.T) {
	sink := &usageSink{fail: errors.New("store down")}
	m := NewUsageMeter(sink.write, time.Hour, nil)
	defer m.Close(context.Background())
	m.Admitted("k", usageHour, 10, 20, time.Second)
	m.Refused("k", usageHour, "window_closed")
	if err := m.Flush(context.Background()); err == nil {
		t.Fatal("flush did not fail")
	}
	m.Admitted("k", usageHour.Add(time.Minute), 1, 2, time.Second)
	sink.mu.Lock()
	sink.fail = nil
	sink.mu.Unlock()
	if err := m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := sink.get("k", usageHour)
	if u.Admitted != 2 || u.InputTokens != 11 || u.OutputTokens != 22 || u.Seconds != 2 || u.Refused["window_closed"] != 1 {
		t.Errorf("after the retry: %+v", u)
	}
	if err := m.Flush(context.Background()); err != nil || sink.writes != 1 {
		t.Errorf("an empty flush wrote: %d writes, %v", sink.writes, err)
	}
}

// Counting a request of a key already counted this hour allocates nothing.
func TestUsageMeterAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	m := NewUsageMeter((&usageSink{}).write, time.Hour, nil)
	defer m.Close(context.Background())
	m.Admitted("k", usageHour, 1, 1, time.Second)
	m.Refused("k", usageHour, "lanes_full")
	if n := testing.AllocsPerRun(1000, func() {
		m.Admitted("k", usageHour, 1, 1, time.Second)
		m.Refused("k", usageHour, "lanes_full")
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// The cost a request pays: one admitted count and one refusal, from
// several goroutines, on keys spread over the shards.
func BenchmarkUsageMeter(b *testing.B) {
	m := NewUsageMeter((&usageSink{}).write, time.Hour, nil)
	defer m.Close(context.Background())
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Admitted(keys[i%len(keys)], usageHour, 31, 50, time.Second)
			i++
		}
	})
}
