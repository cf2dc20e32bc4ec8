#!/usr/bin/env python3
"""SLANG Table 4 (docs/results/slang/table4.md) from the JSON records in
docs/results/slang/table1/, beside the paper's values (reference/slang.md).
Run from the repository root."""
import json
paper = {  # reference/slang.md Table 4: OnlineEig L=1,2,5 | SLANG L=1,2,5
 ('australian','neg_elbo'): [0.580,0.578,0.652,0.574,0.574,0.569],
 ('australian','nll'): [0.344,0.343,0.347,0.342,0.342,0.339],
 ('australian','sym_kl'): [570,320,120,330,310,80],
 ('breast-cancer','neg_elbo'): [0.114,0.116,0.123,0.112,0.111,0.111],
 ('breast-cancer','nll'): [0.092,0.093,0.093,0.092,0.092,0.092],
 ('breast-cancer','sym_kl'): [1.544,2.128,4.402,0.911,0.756,0.842],
}
labels=['online_eig_L1','online_eig_L2','online_eig_L5','slang_L1','slang_L2','slang_L5']
out=[]
out.append('| dataset | metric | | OnlineEig L=1 | L=2 | L=5 | SLANG L=1 | L=2 | L=5 |')
out.append('|---|---|---|---|---|---|---|---|---|')
for ds in ['australian','breast-cancer']:
    runs=[json.load(open(f'docs/results/slang/table1/{ds}_{l}.json')) for l in labels]
    for metric,name in [('neg_elbo','−ELBO/N'),('nll','NLL'),('sym_kl','sym. KL')]:
        ours=[r['metrics'][metric] for r in runs]
        fmt=(lambda v: f'{v:.1f}') if metric=='sym_kl' and ds=='australian' else (lambda v: f'{v:.3f}' if metric!='sym_kl' else f'{v:.3f}')
        out.append(f'| {ds} | {name} | ours | ' + ' | '.join(f"{fmt(m['mean'])} ± {fmt(m['se'])}" for m in ours)+' |')
        out.append(f'| | | paper | ' + ' | '.join(fmt(v) for v in paper[(ds,metric)])+' |')
print('\n'.join(out))
