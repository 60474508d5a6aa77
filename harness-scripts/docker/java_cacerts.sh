# The JDK's own trust store (lib/security/cacerts, or the Debian store it
# links to) does not hold the CA bundle patchgrade installs in the base
# image (--ca-cert): Maven then fails with "PKIX path building failed" on
# repo.maven.apache.org. Each certificate of the bundle not yet trusted is
# imported once, here, for every image over this toolchain.
ca=/usr/local/share/ca-certificates/patchgrade-ca.crt
if [ -f "$ca" ]; then
    kt="{{home}}/bin/keytool -cacerts -storepass changeit"
    have=$($kt -list -v 2>/dev/null | sed -n 's/^\s*SHA256: //p')
    split=$(mktemp -d)
    csplit -s -z -f "$split/c" "$ca" '/-----BEGIN CERTIFICATE-----/' '{*}'
    for f in "$split"/c*; do
        fp=$(openssl x509 -in "$f" -noout -fingerprint -sha256 | cut -d= -f2)
        case "$have" in
            *"$fp"*) ;;
            *) $kt -importcert -noprompt -alias "patchgrade-${f##*/}" -file "$f" >/dev/null ;;
        esac
    done
    rm -rf "$split"
fi
