// The Open Inference Protocol over HTTP/JSON (its REST form), as one route
// of an HttpServer (server/common/http_server.h) on --http-listen:
//
//   GET  /v2/health/live                        200 (empty body)
//   GET  /v2/health/ready                       200, or 400 when not ready
//   GET  /v2                                    server metadata
//   GET  /v2/models/NAME[/versions/V]           model metadata
//   GET  /v2/models/NAME[/versions/V]/ready     200, or 400 when not ready
//   POST /v2/models/NAME[/versions/V]/infer     inference
//
// Each answers through InferenceApi, as the gRPC service does; failures are
// {"error": "..."} with the HTTP form of the status (ToHttpStatus). Tokens
// come in "Authorization: Bearer TOKEN" headers, as the gRPC metadata does.
#ifndef BNN_SERVER_API_INFERENCE_V2_HTTP_API_H_
#define BNN_SERVER_API_INFERENCE_V2_HTTP_API_H_

#include <string>

#include "server/api/inference_v2/inference_api.h"
#include "server/common/http_server.h"

namespace bnn::server::oip {

// Metrics label the REST calls "rest/METHOD" ("rest/ModelInfer").
inline constexpr absl::string_view kRestPrefix = "rest/";

// The route serving "/v2" and everything below it, answering through `api`
// (borrowed; it must outlive the HttpServer).
HttpServer::Route InferenceRoute(InferenceApi* api);
// {"error": message} as the response of requests the HttpServer refuses
// itself (unknown paths, bodies over the limit).
HttpServer::Response JsonRefusal(int status, const std::string& message);

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_HTTP_API_H_
