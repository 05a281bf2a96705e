// A no-op Envoy ext_authz service on grpc-go: every Check is answered OK with no headers and no
// metadata, the reference bench:e2e sets modelgate's Check against (bench/peers/README.md).
//
//	grpc-go-noop HOST:PORT
package main

import (
	"context"
	"log"
	"net"
	"os"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

type noop struct {
	authv3.UnimplementedAuthorizationServer
}

var ok = &authv3.CheckResponse{Status: &status.Status{Code: int32(codes.OK)}}

func (noop) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return ok, nil
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: grpc-go-noop HOST:PORT")
	}
	lis, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	// Envoy's ext_authz buffers bodies up to its limit: a 256 KiB body arrives in one message.
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(16 << 20))
	authv3.RegisterAuthorizationServer(srv, noop{})
	log.Printf("grpc-go no-op ext_authz listening on %s", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
