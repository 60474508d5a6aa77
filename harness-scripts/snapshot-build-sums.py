#!/usr/bin/env python3
# Build seconds of a gold run's instance and snapshot images (issue 22):
#   snapshot-build-sums.py ROOT RUN_ID REPO_PREFIX
# ROOT holds logs/<run>/gold/*/patchgrade.json and build_images/ (as
# harness-scripts/verified-segment.sh lays them out). Prints outcomes, the
# instance and snapshot build seconds, ccache hits, Cython's cache hits
# ("Found compiled" against "Cythonizing" in a verbose install's log), and
# the "before" proxy: each instance costing its snapshot's whole install.
import json,sys,os,re,glob,collections
root, run, repo = sys.argv[1], sys.argv[2], sys.argv[3]
def took(d):
    try: l=open(d+'/build_image.log').read().strip().splitlines()[-1]
    except: return None
    m=re.search(r'took ([0-9.]+)s',l); return float(m.group(1)) if m else None
def hits(d):
    t=open(d+'/build_image.log').read()
    m=re.search(r'Hits:\s+(\d+) /\s+(\d+)',t)  # ccache 4.8 (bookworm)
    if m: return (int(m.group(1)),int(m.group(2)))
    # ccache 4.2 (bullseye): hits direct + preprocessed, and misses
    n=[re.search(r'cache %s\s+(\d+)'%k,t) for k in (r'hit \(direct\)',r'hit \(preprocessed\)','miss')]
    if all(n):
        d,p,m2=(int(x.group(1)) for x in n); return (d+p,d+p+m2)
    return None
def cython(d):
    t=open(d+'/build_image.log').read()
    return (t.count('Found compiled'), t.count('Cythonizing'))
inst=[];snaps={};tests=0;res=collections.Counter()
for rec in glob.glob(f'{root}/logs/{run}/gold/{repo}*/patchgrade.json'):
    j=json.load(open(rec)); res[j['outcome']]+=1
    tests+=j.get('timings',{}).get('tests',0)
    env=j.get('environment','')
    m=re.search(r'(patchgrade\.eval\.[^: ]+):([0-9a-f]+)',env)
    if not m: continue
    d=f"{root}/build_images/instances/{m.group(1)}__{m.group(2)}"
    snap=re.search(r'FROM (\S+)',open(d+'/Dockerfile').read()).group(1).replace(':','__')
    sd=f"{root}/build_images/env/{snap}"
    snaps[sd]=took(sd)
    inst.append((rec.split('/')[-2],took(d),hits(d),snaps[sd],cython(d)))
for i in sorted(inst): print(f"  {i[0]}: instance {i[1]}s, hits {i[2]}, Cython found/translated {i[4]}, its snapshot {i[3]}s")
si=sum(x[1] for x in inst if x[1]); ss=sum(v for v in snaps.values() if v)
h=sum(x[2][0] for x in inst if x[2]); n=sum(x[2][1] for x in inst if x[2])
proxy=sum(x[3] for x in inst if x[3])
cf=sum(x[4][0] for x in inst); ct=sum(x[4][1] for x in inst)
print(f"{repo}: outcomes {dict(res)}; instances {len(inst)} built in {si:.0f}s (mean {si/len(inst):.0f}s); snapshots {len(snaps)} in {ss:.0f}s; hits {h}/{n}; Cython found {cf}, translated {ct}; tests {tests:.0f}s; after={si+ss:.0f}s; before-proxy (each instance a full install = its snapshot's time) {proxy:.0f}s")
