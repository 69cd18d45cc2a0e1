package locks

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Set holds the locks of one call and releases them all at its end:
// Acquire takes every lock it is given or none, answering Aborted with a
// message naming the holder (see the package doc); Release gives back
// everything the set holds. Set Table and Owner, then use the set from
// one goroutine. A Set is meant to live on the caller's stack: the first
// locks sit in the value itself, so a call taking a few locks does not
// allocate.
type Set struct {
	// Table is where the locks are taken. Required.
	Table *Table
	// Owner is reported to callers that find a key held by this set.
	Owner Owner

	n     int // locks held: buf[:min(n, len(buf))], then extra
	buf   [4]heldLock
	extra []heldLock
}

// heldLock is a lock of a Set and its key's hash in the set's table, so
// releasing does not hash again.
type heldLock struct {
	Lock
	h uint64
}

func (s *Set) at(i int) *heldLock {
	if i < len(s.buf) {
		return &s.buf[i]
	}
	return &s.extra[i-len(s.buf)]
}

func (s *Set) push(l heldLock) {
	if s.n < len(s.buf) {
		s.buf[s.n] = l
	} else {
		s.extra = append(s.extra, l)
	}
	s.n++
}

// releaseFrom releases the locks from the i-th on.
func (s *Set) releaseFrom(i int) {
	for j := i; j < s.n; j++ {
		l := s.at(j)
		s.Table.unlock(l.h, l.Key, l.Mode)
	}
	s.n = i
	if i <= len(s.buf) {
		s.extra = s.extra[:0]
	} else {
		s.extra = s.extra[:i-len(s.buf)]
	}
}

// Acquire takes every lock or none; on a conflict it releases what this
// call took and answers Aborted naming the holder and how long it has held
// the key. Locks with an empty Key.ID and keys the set already holds are
// skipped.
func (s *Set) Acquire(locks ...Lock) error {
	start := s.n
next:
	for _, l := range locks {
		if l.Key.ID == "" {
			continue
		}
		for j := range s.n {
			if s.at(j).Key == l.Key {
				continue next
			}
		}
		h := s.Table.hashOf(l.Key)
		if holder, ok := s.Table.tryLock(h, l.Key, l.Mode, s.Owner); !ok {
			s.releaseFrom(start)
			return status.Error(codes.Aborted, busyMessage(l.Key, holder))
		}
		s.push(heldLock{Lock: l, h: h})
	}
	return nil
}

// Release releases every lock the set holds; the set can be used again.
func (s *Set) Release() { s.releaseFrom(0) }

// Len returns the number of locks the set holds.
func (s *Set) Len() int { return s.n }
