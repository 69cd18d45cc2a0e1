package csikit_test

import (
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func codesOf(err error) codes.Code { return status.Code(err) }

func statusErr(c codes.Code, msg string) error { return status.Error(c, msg) }

var nameSeq atomic.Int64

func randName() string { return strconv.FormatInt(nameSeq.Add(1), 10) }
