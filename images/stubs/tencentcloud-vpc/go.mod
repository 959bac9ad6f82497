// A compile-only stand-in for github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc,
// whose zips the Go module proxy refuses (403). flanneld imports it for its
// tencent-vpc backend, which a knest node never uses (flannel runs VXLAN); every call
// returns an error. Used only by images/build.sh through a replace line.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.22
