// The client keywords of OpenSSH 9.2 as Debian 12 builds it (readconf.c's
// keywords[] with GSSAPI and PKCS#11 compiled in, plus Debian's GSSAPI key
// exchange and keepalive patches). A keyword missing here is an error, as in ssh.
//
// `unsupported` marks what changes how ssh makes the connection (where it
// connects from, how it proves the server's identity or the user's, which
// algorithms it accepts, whether it reuses a connection) and that specctl's
// libssh2 transport does not do; docs/ssh.md explains the choice.

#include "ssh_config_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace specctl::remote::sshcfg {

namespace {

constexpr int k_one = 1;
constexpr int k_two = 2;

// readconf.c's multistate tables.
constexpr std::string_view k_yes_no_ask = "yes,no,true,false,ask";

constexpr Keyword one(std::string_view name, Op op = Op::other) {
  return {name, op, k_one, k_one, false, {}};
}
constexpr Keyword checked(std::string_view name, Check check, std::string_view choices = {}) {
  return {name, Op::other, k_one, k_one, false, {}, check, choices};
}
constexpr Keyword lacking(std::string_view name, Check check = Check::none, std::string_view choices = {},
                          std::array<std::string_view, 3> also_off = {}) {
  return {name, Op::other, k_one, k_one, true, also_off, check, choices};
}
constexpr Keyword list(std::string_view name, Op op = Op::other) {
  return {name, op, 0, k_unlimited, false, {}};
}
constexpr Keyword ignored(std::string_view name) {
  return {name, Op::ignored, 0, k_unlimited, false, {}};
}

constexpr auto k_keywords = std::to_array<Keyword>({
    // Deprecated or removed: ssh ignores them (readconf.c oDeprecated, oUnsupported, oIgnore).
    ignored("Protocol"),
    ignored("Cipher"),
    ignored("FallBackToRsh"),
    ignored("GlobalKnownHostsFile2"),
    ignored("RhostsAuthentication"),
    ignored("UserKnownHostsFile2"),
    ignored("UseRoaming"),
    ignored("UseRsh"),
    ignored("UsePrivilegedPort"),
    ignored("UseBlacklistedKeys"),
    ignored("AFSTokenPassing"),
    ignored("KerberosAuthentication"),
    ignored("KerberosTGTPassing"),
    ignored("RSAAuthentication"),
    ignored("RhostsRSAAuthentication"),
    ignored("CompressionLevel"),

    // The structure of the file.
    list("Host", Op::host),
    {"Match", Op::match, 0, k_unlimited, false, {}},
    list("Include", Op::include),
    one("IgnoreUnknown", Op::ignore_unknown),

    // What specctl reads (SshConfigEntry).
    one("HostName", Op::hostname),
    one("User", Op::user),
    one("Port", Op::port),
    one("IdentityFile", Op::identity_file),
    one("IdentityFile2", Op::identity_file),
    one("IdentitiesOnly", Op::identities_only),
    one("CertificateFile", Op::certificate_file),
    {"ProxyJump", Op::proxy_jump, 0, k_unlimited, false, {}},
    {"ProxyCommand", Op::proxy_command, 0, k_unlimited, false, {}},
    one("ConnectTimeout", Op::connect_timeout),
    one("ServerAliveInterval", Op::server_alive_interval),
    one("ProtocolKeepAlives", Op::server_alive_interval), // Debian's old name
    one("SetupTimeOut", Op::server_alive_interval),       // Debian's old name, not ConnectTimeout
    one("ServerAliveCountMax", Op::server_alive_count_max),
    one("StrictHostKeyChecking", Op::strict_host_key_checking),
    list("UserKnownHostsFile", Op::user_known_hosts_file),
    one("HostKeyAlias", Op::host_key_alias),

    // Changes how ssh connects, and specctl's transport does not.
    lacking("GSSAPIAuthentication", Check::flag),
    lacking("GSSAPIKeyExchange", Check::flag),
    lacking("PKCS11Provider"),
    lacking("SmartcardDevice"),
    lacking("SecurityKeyProvider"),
    lacking("HostbasedAuthentication", Check::flag),
    lacking("IdentityAgent", Check::none, {}, {"ssh_auth_sock", "$ssh_auth_sock", "${ssh_auth_sock}"}),
    lacking("ControlMaster", Check::choice, "yes,no,true,false,auto,ask,autoask"),
    lacking("ControlPath"),
    lacking("ControlPersist", Check::flag_or_time),
    lacking("BindAddress"),
    lacking("BindInterface"),
    lacking("AddressFamily", Check::choice, "inet,inet6,any", {"any"}),
    {"CanonicalizeHostname", Op::canonicalize_hostname, k_one, k_one, true, {}},
    {"CanonicalizePermittedCNAMEs", Op::other, 0, k_unlimited, true, {}},
    lacking("ProxyUseFdpass", Check::flag),
    lacking("Ciphers"),
    lacking("MACs"),
    lacking("KexAlgorithms"),
    lacking("HostKeyAlgorithms"),
    lacking("PubkeyAcceptedAlgorithms"),
    lacking("PubkeyAcceptedKeyTypes"),
    lacking("CASignatureAlgorithms"),
    lacking("RequiredRSASize", Check::count),
    {"GlobalKnownHostsFile", Op::other, 0, k_unlimited, true, {}},
    {"KnownHostsCommand", Op::command, 0, k_unlimited, true, {}},
    lacking("RevokedHostKeys"),
    lacking("VerifyHostKeyDNS", Check::choice, k_yes_no_ask),
    lacking("CheckHostIP", Check::flag),
    lacking("NoHostAuthenticationForLocalhost", Check::flag),

    // The rest: a session's features, prompts, logging, forwarding, or nothing
    // specctl's connection depends on.
    checked("GSSAPIDelegateCredentials", Check::flag),
    checked("GSSAPITrustDns", Check::flag),
    one("GSSAPIClientIdentity"),
    one("GSSAPIServerIdentity"),
    checked("GSSAPIRenewalForcesRekey", Check::flag),
    one("GSSAPIKexAlgorithms"),
    one("ForwardAgent"),
    checked("ForwardX11", Check::flag),
    checked("ForwardX11Trusted", Check::flag),
    checked("ForwardX11Timeout", Check::time),
    checked("ExitOnForwardFailure", Check::flag),
    one("XAuthLocation"),
    checked("GatewayPorts", Check::flag),
    checked("PasswordAuthentication", Check::flag),
    checked("KbdInteractiveAuthentication", Check::flag),
    one("KbdInteractiveDevices"),
    checked("ChallengeResponseAuthentication", Check::flag),
    checked("SkeyAuthentication", Check::flag),
    checked("TISAuthentication", Check::flag),
    checked("PubkeyAuthentication", Check::choice, "yes,no,true,false,unbound,host-bound"),
    checked("DSAAuthentication", Check::choice, "yes,no,true,false,unbound,host-bound"),
    {"AddKeysToAgent", Op::other, k_one, k_two, false, {}},
    {"RemoteForward", Op::other, k_one, k_two, false, {}},
    {"LocalForward", Op::other, k_two, k_two, false, {}},
    one("DynamicForward"),
    {"PermitRemoteOpen", Op::other, k_one, k_unlimited, false, {}},
    one("EscapeChar"),
    checked("ConnectionAttempts", Check::count),
    checked("BatchMode", Check::flag),
    checked("Compression", Check::choice, "yes,no"),
    checked("TCPKeepAlive", Check::flag),
    checked("KeepAlive", Check::flag),
    checked("NumberOfPasswordPrompts", Check::count),
    one("SyslogFacility"),
    one("LogLevel"),
    list("LogVerbose"),
    one("PreferredAuthentications"),
    checked("ClearAllForwardings", Check::flag),
    checked("EnableSSHKeysign", Check::flag),
    {"RekeyLimit", Op::other, k_one, k_two, false, {}},
    list("SendEnv"),
    list("SetEnv"),
    checked("HashKnownHosts", Check::flag),
    checked("Tunnel", Check::choice, "ethernet,point-to-point,true,yes,false,no"),
    one("TunnelDevice"),
    {"LocalCommand", Op::command, 0, k_unlimited, false, {}},
    checked("PermitLocalCommand", Check::flag),
    {"RemoteCommand", Op::command, 0, k_unlimited, false, {}},
    checked("VisualHostKey", Check::flag),
    {"IPQoS", Op::other, k_one, k_two, false, {}},
    checked("RequestTTY", Check::choice, "true,yes,false,no,force,auto"),
    checked("SessionType", Check::choice, "none,subsystem,default"),
    checked("StdinNull", Check::flag),
    checked("ForkAfterAuthentication", Check::flag),
    list("CanonicalDomains"),
    checked("CanonicalizeFallbackLocal", Check::flag),
    checked("CanonicalizeMaxDots", Check::count),
    one("StreamLocalBindMask"),
    checked("StreamLocalBindUnlink", Check::flag),
    one("FingerprintHash"),
    checked("UpdateHostKeys", Check::choice, k_yes_no_ask),
    one("HostbasedAcceptedAlgorithms"),
    one("HostbasedKeyTypes"),
    checked("EnableEscapeCommandline", Check::flag),
});

} // namespace

const Keyword* find_keyword(std::string_view lowercase_name) {
  auto found = std::find_if(k_keywords.begin(), k_keywords.end(),
                            [&](const Keyword& k) { return lowercase(k.name) == lowercase_name; });
  return found == k_keywords.end() ? nullptr : &*found;
}

// What is wrong with the value of a keyword specctl does not read, as ssh would refuse it.
std::optional<std::string> value_problem(const Keyword& k, const std::string& value) {
  switch (k.check) {
  case Check::none:
    return std::nullopt;
  case Check::flag:
    return parse_flag(value) ? std::nullopt : std::optional(fmt::format("\"{}\" is neither yes nor no", value));
  case Check::time:
    return value == "none" || parse_seconds(value)
               ? std::nullopt
               : std::optional(fmt::format("\"{}\" is not a time (seconds, or with s, m, h, d, w)", value));
  case Check::count:
    return parse_count(value) ? std::nullopt
                              : std::optional(fmt::format("\"{}\" is not a whole number (0 or more)", value));
  case Check::flag_or_time:
    // ControlPersist compares yes and no with case.
    return value == "yes" || value == "no" || value == "true" || value == "false" || parse_seconds(value)
               ? std::nullopt
               : std::optional(fmt::format("\"{}\" is neither yes, no nor a time", value));
  case Check::choice: {
    std::string wanted = "," + std::string(k.choices) + ",";
    return wanted.find("," + lowercase(value) + ",") != std::string::npos && !value.empty()
               ? std::nullopt
               : std::optional(fmt::format("\"{}\" is not one of {}", value, k.choices));
  }
  }
  return std::nullopt;
}

std::vector<std::string> keyword_names() {
  std::vector<std::string> names;
  for (const auto& k : k_keywords) {
    if (k.op != Op::ignored) {
      names.emplace_back(k.name);
    }
  }
  return names;
}

} // namespace specctl::remote::sshcfg
