package admission

import (
	"context"
	"sync"
	"time"
)

// flushLoop writes a buffer to the store every interval, and once more when
// it is closed: the loop that Batcher (last-use times) and UsageMeter
// (hourly usage) share.
type flushLoop struct {
	flush func(context.Context) error
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startFlushLoop calls flush every interval, each call bounded by the
// interval, and hands its errors to failed.
func startFlushLoop(interval time.Duration, flush func(context.Context) error, failed func(error)) *flushLoop {
	l := &flushLoop{flush: flush, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), interval)
				if err := flush(ctx); err != nil {
					failed(err)
				}
				cancel()
			}
		}
	}()
	return l
}

// close stops the loop and flushes what is left. It is safe to call more
// than once; later calls do nothing.
func (l *flushLoop) close(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		err = l.flush(ctx)
	})
	return err
}
